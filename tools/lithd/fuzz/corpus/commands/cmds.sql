-- name: transfer
-- Move :amount from :from to :to.
UPDATE accounts SET balance = balance - :amount WHERE id = :from;
UPDATE accounts SET balance = balance + :amount WHERE id = :to;
INSERT INTO ledger(src, dst, amount) VALUES (:from, :to, :amount) RETURNING id;

-- name: get
SELECT * FROM accounts WHERE id = :id;
