CREATE TABLE accounts(id INTEGER PRIMARY KEY, balance INT);
-- step
CREATE TABLE ledger(id INTEGER PRIMARY KEY, src, dst, amount);
-- step: an index
CREATE INDEX ledger_src ON ledger(src);
