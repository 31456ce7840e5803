"""SQLAlchemy (1.4) through lith.sqla, the lith dialect, against a real lithd.

The lithd is test_client.py's Lithd (LITHD names the binary; without it the
tests skip). SQLAlchemy is an interpreter's own package: run-client-tests.sh
runs this file with PATH's python3 if it imports sqlalchemy, else with
Debian's /usr/bin/python3 (python3-sqlalchemy, from make deps), and says so
in LITH_SQLALCHEMY_TEST:

    unset      run by hand: skipped where sqlalchemy cannot be imported
    required   make test: an interpreter without sqlalchemy fails the suite
    elsewhere  make test, an interpreter without it: another one runs this file

From the source tree the dialect is registered with
sqlalchemy.dialects.registry.register; InstallTest checks that an installed
package needs no such call (its entry points).
"""
import importlib
import os
import shutil
import sqlite3
import subprocess
import sys
import tempfile
import threading
import time
import unittest

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
sys.path.insert(0, os.path.join(HERE, "..", "src"))

from test_client import CERTS_SH, LITHD, TOKEN, Lithd  # noqa: E402

import lith  # noqa: E402
import lith.dbapi  # noqa: E402

MODE = os.environ.get("LITH_SQLALCHEMY_TEST", "")
try:
    import sqlalchemy as sa
    from sqlalchemy import orm
    from sqlalchemy.dialects import registry
    from sqlalchemy.dialects.sqlite import insert as sqlite_insert
except ImportError as e:
    sa = None
    MISSING = str(e)

if sa is None and MODE == "required":
    class SQLAlchemyImportTest(unittest.TestCase):
        def test_sqlalchemy_is_importable(self):
            self.fail(f"{sys.executable} cannot import sqlalchemy ({MISSING}), and make test runs "
                      "this suite with it: make deps installs Debian's python3-sqlalchemy")

RUN = sa is not None and MODE != "elsewhere" and bool(LITHD)
WHY = ("run by another interpreter in this make test" if MODE == "elsewhere" else
       "sqlalchemy cannot be imported" if sa is None else "LITHD (the lithd binary) is not set")

if sa is not None:
    for name in ("lith", "lith.http", "lith.https"):
        registry.register(name, "lith.sqla", "LithDialect")

    Base = orm.declarative_base()

    class Author(Base):
        __tablename__ = "authors"
        id = sa.Column(sa.Integer, primary_key=True)
        name = sa.Column(sa.String(80), unique=True, nullable=False)
        born = sa.Column(sa.Date)
        books = orm.relationship("Book", back_populates="author", order_by="Book.id",
                                 cascade="all, delete-orphan")

    class Book(Base):
        __tablename__ = "books"
        id = sa.Column(sa.Integer, primary_key=True)
        author_id = sa.Column(sa.Integer, sa.ForeignKey("authors.id"), nullable=False)
        title = sa.Column(sa.String, nullable=False)
        added = sa.Column(sa.String, server_default=sa.text("'new'"))
        author = orm.relationship("Author", back_populates="books")

    class Item(Base):
        __tablename__ = "items"
        key = sa.Column(sa.String, primary_key=True)
        thread = sa.Column(sa.Integer, nullable=False)

    class Counter(Base):
        __tablename__ = "counter"
        id = sa.Column(sa.Integer, primary_key=True)
        n = sa.Column(sa.Integer, nullable=False)


def lith_url(server, path="/", token=None, scheme="lith"):
    """A Lithd's address as the dialect's URL."""
    auth = f":{token}@" if token else ""
    return f"{scheme}://{auth}{server.url.split('://', 1)[1]}{path}"


class Statements:
    """The SQL an engine sends, recorded (before_cursor_execute)."""

    def __init__(self, engine):
        self.sql = []
        sa.event.listen(engine, "before_cursor_execute", self._record)

    def _record(self, conn, cursor, statement, parameters, context, executemany):
        self.sql.append(statement)

    def take(self):
        out, self.sql = self.sql, []
        return out


@unittest.skipUnless(RUN, WHY)
class OrmTest(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        cls.server = Lithd(token=TOKEN)
        cls.engine = sa.create_engine(lith_url(cls.server, token=TOKEN))
        Base.metadata.create_all(cls.engine)
        cls.log = Statements(cls.engine)

    @classmethod
    def tearDownClass(cls):
        cls.engine.dispose()
        cls.server.stop()

    def setUp(self):
        with self.engine.begin() as c:
            for table in ("books", "authors", "items", "counter"):
                c.exec_driver_sql(f"DELETE FROM {table}")
        self.log.take()
        self.raw = lith.Client(self.server.url, token=TOKEN)
        self.addCleanup(self.raw.close)

    def lithd_rows(self, sql):
        """What lithd has committed, asked apart from SQLAlchemy."""
        return self.raw.query(sql)[0]["rows"]

    def test_create_all_and_reflection(self):
        insp = sa.inspect(self.engine)
        self.assertEqual(insp.get_table_names(), ["authors", "books", "counter", "items", "kv"])
        self.assertEqual([(c["name"], str(c["type"]), c["nullable"]) for c in insp.get_columns("authors")],
                         [("id", "INTEGER", False), ("name", "VARCHAR(80)", False), ("born", "DATE", True)])
        fk = insp.get_foreign_keys("books")
        self.assertEqual([(f["constrained_columns"], f["referred_table"], f["referred_columns"]) for f in fk],
                         [(["author_id"], "authors", ["id"])])
        self.assertEqual([u["column_names"] for u in insp.get_unique_constraints("authors")], [["name"]])
        # a second create_all finds every table (PRAGMA table_info) and makes none
        Base.metadata.create_all(self.engine)
        self.assertEqual([s for s in self.log.take() if "CREATE" in s], [])
        # a table of its own, reflected back whole, then dropped
        md = sa.MetaData()
        sa.Table("extra", md, sa.Column("id", sa.Integer, primary_key=True), sa.Column("v", sa.LargeBinary))
        md.create_all(self.engine)
        back = sa.Table("extra", sa.MetaData(), autoload_with=self.engine)
        self.assertEqual([c.name for c in back.columns], ["id", "v"])
        md.drop_all(self.engine)
        self.assertNotIn("extra", sa.inspect(self.engine).get_table_names())
        self.assertEqual(self.lithd_rows("SELECT count(*) FROM sqlite_master WHERE name = 'extra'"), [[0]])

    def test_session_commit_and_rollback(self):
        import datetime
        with orm.Session(self.engine) as s:
            s.add(Author(name="Le Guin", born=datetime.date(1929, 10, 21),
                         books=[Book(title="The Dispossessed"), Book(title="The Lathe of Heaven")]))
            s.commit()
        self.assertEqual(self.lithd_rows("SELECT name, born FROM authors"), [["Le Guin", "1929-10-21"]])
        self.assertEqual(self.lithd_rows("SELECT count(*) FROM books"), [[2]])
        with orm.Session(self.engine) as s:
            a = s.execute(sa.select(Author)).scalar_one()
            self.assertEqual(a.born, datetime.date(1929, 10, 21))
            s.add(Author(name="Banks"))
            a.books[0].title = "changed"
            s.flush()  # sent: lithd's interactive transaction holds it, uncommitted
            self.assertEqual(s.execute(sa.select(sa.func.count()).select_from(Author)).scalar(), 2)
            self.assertEqual(self.lithd_rows("SELECT count(*) FROM authors"), [[1]])
            s.rollback()
            self.assertEqual(s.execute(sa.select(Book.title).order_by(Book.id)).scalars().all(),
                             ["The Dispossessed", "The Lathe of Heaven"])
        self.assertEqual(self.lithd_rows("SELECT name FROM authors"), [["Le Guin"]])
        self.assertEqual(self.lithd_rows("SELECT title FROM books ORDER BY id"),
                         [["The Dispossessed"], ["The Lathe of Heaven"]])
        # a delete cascades over the relationship
        with orm.Session(self.engine) as s, s.begin():
            s.delete(s.execute(sa.select(Author)).scalar_one())
        self.assertEqual(self.lithd_rows("SELECT (SELECT count(*) FROM authors), (SELECT count(*) FROM books)"),
                         [[0, 0]])

    def test_relationships_lazy_and_joined(self):
        with orm.Session(self.engine) as s, s.begin():
            s.add_all([Author(name="a", books=[Book(title="a1"), Book(title="a2")]),
                       Author(name="b", books=[Book(title="b1")])])
        with orm.Session(self.engine) as s:
            self.log.take()
            authors = s.execute(sa.select(Author).order_by(Author.name)).scalars().all()
            self.assertEqual(len(self.log.take()), 1)
            self.assertEqual([b.title for b in authors[0].books], ["a1", "a2"])  # lazy: one SELECT each
            self.assertEqual([b.title for b in authors[1].books], ["b1"])
            self.assertEqual(len(self.log.take()), 2)
            self.assertEqual(authors[0].books[1].author.name, "a")  # in the identity map: no SELECT
            self.assertEqual(self.log.take(), [])
        with orm.Session(self.engine) as s:
            authors = s.execute(sa.select(Author).options(orm.joinedload(Author.books))
                                .order_by(Author.name)).unique().scalars().all()
            self.assertEqual([[b.title for b in a.books] for a in authors], [["a1", "a2"], ["b1"]])
            sql = self.log.take()
            self.assertEqual(len(sql), 1)
            self.assertIn("LEFT OUTER JOIN books", sql[0])
            book = s.execute(sa.select(Book).where(Book.title == "b1")).scalar_one()
            self.assertEqual(book.author.name, "b")
        # the foreign key is lithd's to enforce
        with orm.Session(self.engine) as s:
            s.add(Book(title="orphan", author_id=12345))
            with self.assertRaises(sa.exc.IntegrityError) as cm:
                s.commit()
            self.assertIn("FOREIGN KEY constraint failed", str(cm.exception.orig))

    def test_returning(self):
        authors = Author.__table__
        with self.engine.begin() as c:
            rows = c.execute(authors.insert().values(name="r").returning(authors.c.id, authors.c.name)).all()
            self.assertEqual(len(rows), 1)
            new_id = rows[0].id
            self.assertEqual(rows[0].name, "r")
            self.assertEqual(c.execute(authors.update().where(authors.c.id == new_id).values(name="r2")
                                       .returning(authors.c.name, authors.c.id)).all(), [("r2", new_id)])
            up = sqlite_insert(authors).values(id=new_id, name="r3")
            up = up.on_conflict_do_update(index_elements=[authors.c.id], set_={"name": up.excluded.name})
            self.assertEqual(c.execute(up.returning(authors.c.name)).scalars().all(), ["r3"])
            self.assertEqual(c.execute(authors.delete().where(authors.c.id == new_id)
                                       .returning(authors.c.name)).scalars().all(), ["r3"])
        self.assertEqual(self.lithd_rows("SELECT count(*) FROM authors"), [[0]])
        self.log.take()
        # the ORM's INSERT brings its key and server default back in its own answer
        with orm.Session(self.engine, expire_on_commit=False) as s, s.begin():
            a = Author(name="ret", books=[Book(title="t")])
            s.add(a)
            s.flush()
            self.assertEqual(a.books[0].added, "new")
        inserts = [q for q in self.log.take() if q.startswith("INSERT")]
        self.assertEqual(len(inserts), 2)
        self.assertTrue(all(" RETURNING " in q for q in inserts), inserts)
        self.assertEqual(self.lithd_rows("SELECT id FROM authors"), [[a.id]])
        # a bulk UPDATE with synchronize_session="fetch": one statement, its rows returned
        with orm.Session(self.engine) as s, s.begin():
            book = s.get(Book, a.books[0].id)
            self.log.take()
            s.execute(sa.update(Book).where(Book.author_id == a.id).values(title="u")
                      .execution_options(synchronize_session="fetch"))
            sql = self.log.take()
            self.assertEqual(len(sql), 1)
            self.assertIn("RETURNING", sql[0])
            self.assertEqual(book.title, "u")
        self.assertEqual(self.engine.dialect.server_version_info,
                         tuple(int(x) for x in self.lithd_rows("SELECT sqlite_version()")[0][0].split(".")))

    def test_implicit_returning_false_is_kept(self):
        engine = sa.create_engine(lith_url(self.server, token=TOKEN), implicit_returning=False)
        self.addCleanup(engine.dispose)
        log = Statements(engine)
        with orm.Session(engine) as s, s.begin():
            a = Author(name="no-returning")
            s.add(a)
            s.flush()
            self.assertIsNotNone(a.id)  # from lastrowid
        self.assertFalse(engine.dialect.implicit_returning)
        self.assertEqual([q for q in log.take() if q.startswith("INSERT")],
                         ["INSERT INTO authors (name, born) VALUES (?, ?)"])
        with engine.begin() as c:  # asked for, RETURNING is still written
            self.assertEqual(c.execute(Author.__table__.delete().returning(Author.name)).scalars().all(),
                             ["no-returning"])

    def test_unique_violation_and_the_session_after_it(self):
        with orm.Session(self.engine) as s:
            s.add(Author(name="dup"))
            s.commit()
            s.add(Author(name="dup"))
            with self.assertRaises(sa.exc.IntegrityError) as cm:
                s.commit()
            self.assertIsInstance(cm.exception.orig, lith.dbapi.IntegrityError)
            self.assertTrue(cm.exception.orig.sqlite_errorname.startswith("SQLITE_CONSTRAINT"))
            self.assertIn("UNIQUE constraint failed: authors.name", str(cm.exception))
            with self.assertRaises(sa.exc.PendingRollbackError):
                s.execute(sa.select(Author))
            s.rollback()
            s.add(Author(name="after"))
            s.commit()
            self.assertEqual(s.execute(sa.select(Author.name).order_by(Author.name)).scalars().all(),
                             ["after", "dup"])
        # Core: the statement's transaction is rolled back, the connection goes on
        with self.engine.connect() as c:
            with self.assertRaises(sa.exc.IntegrityError):
                with c.begin():
                    c.execute(Author.__table__.insert().values(name="x"))
                    c.execute(Author.__table__.insert().values(name="dup"))
            self.assertEqual(c.execute(sa.select(sa.func.count()).select_from(Author)).scalar(), 2)
        self.assertEqual(self.lithd_rows("SELECT name FROM authors ORDER BY name"), [["after"], ["dup"]])

    def test_64_threads_through_one_engine(self):
        with orm.Session(self.engine) as s, s.begin():
            s.add(Counter(id=1, n=0))
        threads, each = 64, 5
        failures = []

        def work(t):
            try:
                for i in range(each):
                    with orm.Session(self.engine) as s, s.begin():
                        s.add(Item(key=f"{t}-{i}", thread=t))
                        s.execute(sa.update(Counter).where(Counter.id == 1).values(n=Counter.n + 1))
            except Exception as e:  # noqa: BLE001 (reported below)
                failures.append(repr(e))

        started = time.monotonic()
        pool = [threading.Thread(target=work, args=(t,)) for t in range(threads)]
        for th in pool:
            th.start()
        for th in pool:
            th.join()
        elapsed = time.monotonic() - started
        self.assertEqual(failures, [])
        keys = [r[0] for r in self.lithd_rows("SELECT key FROM items")]
        self.assertEqual(sorted(keys), sorted(f"{t}-{i}" for t in range(threads) for i in range(each)))
        self.assertEqual(self.lithd_rows("SELECT n FROM counter"), [[threads * each]])
        print(f"\n  {threads * each} transactions from {threads} threads in {elapsed:.2f} s", file=sys.stderr)

    def test_isolation_levels(self):
        # SERIALIZABLE (no PRAGMA: lithd refuses settings) and AUTOCOMMIT
        engine = sa.create_engine(lith_url(self.server, token=TOKEN), isolation_level="SERIALIZABLE")
        self.addCleanup(engine.dispose)
        with engine.connect() as c:
            self.assertEqual(c.get_isolation_level(), "SERIALIZABLE")
            with c.begin():
                c.execute(Item.__table__.insert().values(key="tx", thread=0))
                self.assertEqual(self.lithd_rows("SELECT count(*) FROM items"), [[0]])
        self.assertEqual(self.lithd_rows("SELECT count(*) FROM items"), [[1]])
        with engine.connect().execution_options(isolation_level="AUTOCOMMIT") as c:
            self.assertEqual(c.get_isolation_level(), "AUTOCOMMIT")
            c.execute(Item.__table__.insert().values(key="auto", thread=0))
            self.assertEqual(self.lithd_rows("SELECT count(*) FROM items"), [[2]])  # committed alone
        with engine.connect() as c:  # back in the pool as SERIALIZABLE
            self.assertEqual(c.get_isolation_level(), "SERIALIZABLE")
        with self.assertRaises(sa.exc.ArgumentError) as cm:
            with sa.create_engine(lith_url(self.server, token=TOKEN),
                                  isolation_level="READ UNCOMMITTED").connect():
                pass
        self.assertIn("SERIALIZABLE and AUTOCOMMIT", str(cm.exception))

    def test_url_options(self):
        def rows(url, **kw):
            engine = sa.create_engine(url, **kw)
            try:
                with engine.connect() as c:
                    return c.execute(sa.text("SELECT count(*) FROM kv")).scalar()
            finally:
                engine.dispose()
        host = self.server.url.split("://", 1)[1]
        self.assertEqual(rows(f"lith://:{TOKEN}@{host}/"), 0)
        self.assertEqual(rows(f"lith+http://{host}/?token={TOKEN}&timeout=5"), 0)
        with self.assertRaises(sa.exc.OperationalError) as cm:
            rows(f"lith://:wrong@{host}/")
        self.assertIsInstance(cm.exception.orig, lith.dbapi.Error)
        old = os.environ.get("LITHD_TOKEN")
        os.environ["LITHD_TOKEN"] = TOKEN
        try:
            self.assertEqual(rows(f"lith://{host}/"), 0)
        finally:
            os.environ.pop("LITHD_TOKEN") if old is None else os.environ.__setitem__("LITHD_TOKEN", old)
        for url, said in [(f"lith://user:{TOKEN}@{host}/", "no user name"),
                          (f"lith://{host}/?tokn=x", "not tokn"),
                          (f"lith://:{TOKEN}@{host}/?token=x", "given twice"),
                          (f"lith://{host}/?timeout=soon", "not a float"),
                          ("lith+https:///", "no port and no +https")]:
            with self.assertRaises(sa.exc.ArgumentError, msg=url) as cm:
                rows(url)
            self.assertIn(said, str(cm.exception), url)
        from lith.sqla import LithDialect
        with self.assertRaises(sa.exc.ArgumentError) as cm:  # a name registered by hand
            LithDialect().create_connect_args(sa.engine.make_url(f"lith+ws://{host}/"))
        self.assertIn("lith://, lith+http://, lith+https://", str(cm.exception))

    def test_a_transaction_from_its_first_read(self):
        """docs/clients.md's recipe (as SQLAlchemy's for pysqlite): the
        transaction opens at SQLAlchemy's begin, so a read-decide-write is
        one transaction (no update lost), and SAVEPOINTs work."""
        engine = sa.create_engine(lith_url(self.server, token=TOKEN))
        self.addCleanup(engine.dispose)

        @sa.event.listens_for(engine, "connect")
        def connect(dbapi_connection, record):
            dbapi_connection.isolation_level = None  # lith.dbapi opens none itself

        @sa.event.listens_for(engine, "begin")
        def begin(conn):
            conn.exec_driver_sql("BEGIN IMMEDIATE")

        with orm.Session(engine) as s, s.begin():
            s.add(Counter(id=1, n=0))
        threads, each = 16, 10

        def work():
            for _ in range(each):
                with orm.Session(engine) as s, s.begin():
                    counter = s.get(Counter, 1)
                    counter.n = counter.n + 1
        pool = [threading.Thread(target=work) for _ in range(threads)]
        for th in pool:
            th.start()
        for th in pool:
            th.join()
        self.assertEqual(self.lithd_rows("SELECT n FROM counter"), [[threads * each]])
        with orm.Session(engine) as s:
            s.add(Item(key="kept", thread=0))
            nested = s.begin_nested()
            s.add(Item(key="undone", thread=0))
            s.flush()
            nested.rollback()
            s.commit()
        self.assertEqual(self.lithd_rows("SELECT key FROM items"), [["kept"]])

    def test_no_host_is_lithd_dbapi_default(self):
        old = {k: os.environ.get(k) for k in ("LITHD_URL", "LITHD_TOKEN")}
        os.environ.update(LITHD_URL=self.server.url, LITHD_TOKEN=TOKEN)
        try:
            for url in ("lith:///", "lith://"):
                engine = sa.create_engine(url)
                with engine.connect() as c:
                    self.assertEqual(c.execute(sa.text("SELECT count(*) FROM kv")).scalar(), 0)
                engine.dispose()
        finally:
            for k, v in old.items():
                os.environ.pop(k) if v is None else os.environ.__setitem__(k, v)

    def test_unreachable_is_a_disconnect(self):
        engine = sa.create_engine("lith://127.0.0.1:1/", connect_args={"max_retries": 0})
        with self.assertRaises(sa.exc.OperationalError) as cm:
            engine.connect()
        self.assertTrue(cm.exception.connection_invalidated)
        self.assertIsInstance(cm.exception.orig, lith.ConnectionFailed)


@unittest.skipUnless(RUN, WHY)
class TransactionBoundsTest(unittest.TestCase):
    """An ORM transaction is lithd's interactive transaction: it holds the
    writer, within --tx-max-ms."""

    def test_a_transaction_past_tx_max_ms_is_rolled_back(self):
        server = Lithd("--tx-max-ms", "300")
        self.addCleanup(server.stop)
        engine = sa.create_engine(lith_url(server))
        self.addCleanup(engine.dispose)
        Base.metadata.create_all(engine)
        with orm.Session(engine) as s:
            s.add(Item(key="slow", thread=1))
            s.flush()
            time.sleep(0.6)
            with self.assertRaises(sa.exc.OperationalError):
                s.commit()
            s.rollback()
            s.add(Item(key="quick", thread=1))
            s.commit()
            self.assertEqual(s.execute(sa.select(Item.key)).scalars().all(), ["quick"])


@unittest.skipUnless(RUN, WHY)
class TwoDatabasesTest(unittest.TestCase):
    """lith://HOST:PORT/NAME against a lithd with --db a=a.db --db b=b.db."""

    def test_each_engine_reaches_its_database(self):
        server = Lithd("--db", "a=a.db", "--db", "b=b.db")
        self.addCleanup(server.stop)
        a, b = sa.create_engine(lith_url(server, "/a")), sa.create_engine(lith_url(server, "/b"))
        for e in (a, b):
            self.addCleanup(e.dispose)
            Base.metadata.create_all(e)
        with orm.Session(a) as s, s.begin():
            s.add(Author(name="in-a"))
        with orm.Session(b) as s, s.begin():
            s.add_all([Author(name="in-b"), Author(name="in-b too")])
        with orm.Session(b) as s:
            self.assertEqual(s.execute(sa.select(Author.name).order_by(Author.name)).scalars().all(),
                             ["in-b", "in-b too"])

        def file_rows(name):
            conn = sqlite3.connect("file:%s?mode=ro" % os.path.join(server.dir, name), uri=True)
            try:
                return conn.execute("SELECT name FROM authors ORDER BY name").fetchall()
            finally:
                conn.close()
        self.assertEqual(file_rows("a.db"), [("in-a",)])
        self.assertEqual(file_rows("b.db"), [("in-b",), ("in-b too",)])
        with sqlite3.connect("file:%s?mode=ro" % os.path.join(server.dir, "t.db"), uri=True) as conn:
            self.assertEqual(conn.execute("SELECT count(*) FROM sqlite_master WHERE name = 'authors'")
                             .fetchone(), (0,))
        for path, said in (("/c", 'no database "c" here'), ("/", "none is the default")):
            engine = sa.create_engine(lith_url(server, path))
            with self.assertRaises(sa.exc.OperationalError) as cm:
                engine.connect()
            self.assertIn(said, str(cm.exception))
            engine.dispose()


@unittest.skipUnless(RUN, WHY)
@unittest.skipUnless(shutil.which("openssl"), "openssl (for the test certificates) is not installed")
class HttpsTest(unittest.TestCase):
    def test_lith_https_with_ca_file(self):
        certs = tempfile.mkdtemp(prefix="lith-sqla-certs-")
        self.addCleanup(shutil.rmtree, certs, True)
        subprocess.run(["sh", CERTS_SH, certs], check=True)
        server = Lithd(certs=certs)
        self.addCleanup(server.stop)
        ca = os.path.join(certs, "ca.pem")
        engine = sa.create_engine(lith_url(server, scheme="lith+https") + f"?ca_file={ca}")
        self.addCleanup(engine.dispose)
        self.assertTrue(str(engine.url).startswith("lith+https://127.0.0.1:"))
        with engine.begin() as c:
            c.execute(sa.text("INSERT INTO kv VALUES ('tls', 1)"))
        with engine.connect() as c:
            self.assertEqual(c.execute(sa.text("SELECT v FROM kv WHERE k = 'tls'")).scalar(), 1)
        # without the CA (and a CA bundle that cannot know it): refused
        plain = sa.create_engine(lith_url(server, scheme="lith+https"), connect_args={"max_retries": 0})
        old = os.environ.get("SSL_CERT_FILE")
        os.environ["SSL_CERT_FILE"] = "/nonexistent-ca-file"
        try:
            with self.assertRaises(sa.exc.OperationalError) as cm:
                plain.connect()
        finally:
            os.environ.pop("SSL_CERT_FILE") if old is None else os.environ.__setitem__("SSL_CERT_FILE", old)
        self.assertIn("CERTIFICATE_VERIFY_FAILED", str(cm.exception))


@unittest.skipUnless(RUN, WHY)
@unittest.skipUnless(os.environ.get("LITH_PIP_TEST"), "LITH_PIP_TEST is not set (make test sets it)")
class InstallTest(unittest.TestCase):
    """pip install ./clients/python into a venv that sees this interpreter's
    sqlalchemy (--system-site-packages): create_engine("lith://...") then
    works with no registry call, from the entry points of the wheel."""

    def test_installed_package_needs_no_registry_call(self):
        try:
            importlib.import_module("ensurepip")
            importlib.import_module("venv")
        except ImportError:
            self.fail(f"{sys.executable} has no venv/ensurepip (Debian: python3-venv, from make deps)")
        server = Lithd()
        self.addCleanup(server.stop)
        root = os.path.join(HERE, "..")
        with tempfile.TemporaryDirectory() as d:
            env_dir = os.path.join(d, "venv")
            subprocess.run([sys.executable, "-m", "venv", "--system-site-packages", env_dir], check=True)
            py = os.path.join(env_dir, "bin", "python")
            subprocess.run([py, "-m", "pip", "install", "-q", "--no-index", root], check=True, cwd=d)
            program = (
                "import sqlalchemy as sa, sys\n"
                "engine = sa.create_engine(sys.argv[1])\n"
                "with engine.begin() as c:\n"
                "    c.execute(sa.text(\"INSERT INTO kv VALUES ('installed', 1)\"))\n"
                "with engine.connect() as c:\n"
                "    print(c.execute(sa.text(\"SELECT k FROM kv\")).scalar())\n"
                "print(type(engine.dialect).__module__, sys.modules['lith'].__file__)\n")
            env = {k: v for k, v in os.environ.items() if k != "PYTHONPATH"}
            out = subprocess.run([py, "-c", program, lith_url(server)], cwd=d, env=env,
                                 capture_output=True, text=True)
            self.assertEqual(out.returncode, 0, out.stderr)
            lines = out.stdout.splitlines()
            self.assertEqual(lines[0], "installed")
            self.assertTrue(lines[1].startswith("lith.sqla " + env_dir), lines[1])


@unittest.skipIf(MODE == "elsewhere", WHY)
class SdistTest(unittest.TestCase):
    """The sdist carries the entry points: a wheel built from it has them."""

    def test_wheel_from_the_sdist_has_the_entry_points(self):
        import tarfile
        import zipfile
        with tempfile.TemporaryDirectory() as d:
            out = subprocess.run([sys.executable, "-c",
                                  "import sys, lith_build; print(lith_build.build_sdist(sys.argv[1]))", d],
                                 cwd=os.path.join(HERE, "..", "_build"), check=True, capture_output=True, text=True)
            with tarfile.open(os.path.join(d, out.stdout.strip())) as t:
                t.extractall(d, **({"filter": "data"} if hasattr(tarfile, "data_filter") else {}))
            src = os.path.join(d, out.stdout.strip()[:-len(".tar.gz")])
            wheel = subprocess.run([sys.executable, "-c",
                                    "import sys, lith_build; print(lith_build.build_wheel(sys.argv[1]))", d],
                                   cwd=os.path.join(src, "_build"), check=True, capture_output=True, text=True)
            with zipfile.ZipFile(os.path.join(d, wheel.stdout.strip())) as z:
                names = [n for n in z.namelist() if n.endswith(".dist-info/entry_points.txt")]
                self.assertEqual(len(names), 1, z.namelist())
                text = z.read(names[0]).decode()
                self.assertIn("src/lith/sqla.py", [n.split("/", 1)[1] for n in tarfile.open(
                    os.path.join(d, out.stdout.strip())).getnames() if "/" in n])
        self.assertEqual(text.splitlines(), ["[sqlalchemy.dialects]", "lith = lith.sqla:LithDialect",
                                             "lith.http = lith.sqla:LithDialect",
                                             "lith.https = lith.sqla:LithDialect"])


if __name__ == "__main__":
    unittest.main()
