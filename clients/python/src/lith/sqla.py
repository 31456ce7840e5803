"""SQLAlchemy dialect for lithd: SQLAlchemy's SQLite dialect over lith.dbapi.

    import sqlalchemy
    engine = sqlalchemy.create_engine("lith://127.0.0.1:8765/")

URLs (an installed package registers these names as entry points of the
group "sqlalchemy.dialects"; from a source tree, call
sqlalchemy.dialects.registry.register(NAME, "lith.sqla", "LithDialect")
for "lith", "lith.http" and "lith.https"):

    lith://HOST:PORT/              http
    lith+http://HOST:PORT/         the same
    lith+https://HOST:PORT/        https; ?ca_file=PATH for a private CA
    lith://HOST:PORT/NAME          lithd's database NAME (lithd --db NAME=PATH)
    lith://:TOKEN@HOST:PORT/       the bearer token (or ?token=TOKEN; with
                                   neither, lith.dbapi's default: LITHD_TOKEN)
    lith:///                       no host: lith.dbapi's default address
    ?timeout=SECONDS               each request's bound (lith.dbapi's timeout)

Why a subclass of SQLAlchemy's pysqlite dialect: lithd runs SQLite, so the
SQL SQLAlchemy compiles for SQLite (types, DDL, reflection through PRAGMA
reads, which lithd lets run) is the SQL lithd runs; and lith.dbapi is
shaped as sqlite3, so pysqlite's handling of dates (ISO strings), its qmark
parameters and sqlite3's transaction rule (a write opens the transaction)
hold as they are. The dialect's name stays "sqlite", so that
sqlite_-prefixed options, sqlalchemy.dialects.sqlite.insert's ON CONFLICT,
with_variant(..., "sqlite") and Alembic's SQLite support apply; its driver
is "lith". What this module changes, and why:

- The DB-API module and the URL (create_connect_args).
- No create_function on connect: pysqlite registers a Python REGEXP
  function on each connection, but lithd runs the SQL in its own process,
  where no Python function can run (regexp_match is not supported).
- Isolation levels: pysqlite sets PRAGMA read_uncommitted, a setting lithd
  refuses (and one without meaning unless connections share a cache).
  SERIALIZABLE is what lithd gives (one writer, which a transaction holds
  until it ends); AUTOCOMMIT is sqlite3's isolation_level = None.
- Versions: lith.dbapi.sqlite_version_info is this host's SQLite (the
  one lithd runs when it runs here), which the SQLite dialect reads for
  its feature flags before any connection; server_version_info is the server's own SQLite, read on
  the first connection (SELECT sqlite_version(), through the connection's
  server_version()), and it decides RETURNING.
- RETURNING: SQLAlchemy 1.4's SQLite compiler has none; SQLite has it since
  3.35, so LithCompiler writes it, and the dialect turns on 1.4's
  implicit_returning (an INSERT's new primary key and server defaults come
  back in its own answer) and full_returning (ORM bulk UPDATE/DELETE with
  synchronize_session="fetch" in one statement).
- Disconnects: a lith.ConnectionFailed or lith.OutcomeUnknown (lithd
  restarted or unreachable) invalidates the pooled connection, whose
  interactive transaction, if any, lithd no longer has.
- The pool: SQLAlchemy's QueuePool. A connection is a lith.Client and a
  Hrana stream, cheap to open, but kept it saves the stream's opening and
  closing round trips; an idle one whose stream lithd closed
  (--stream-idle-ms) opens another by itself (lith.dbapi).

Tested with SQLAlchemy 1.4 (tests/test_sqlalchemy.py). For SQLAlchemy 2,
which would find import_dbapi, its own RETURNING and its flags' names
(insert_returning, ...), nothing is tested.
"""
import sqlalchemy
from sqlalchemy import exc, pool
from sqlalchemy.dialects.sqlite.base import SQLiteCompiler
from sqlalchemy.dialects.sqlite.pysqlite import SQLiteDialect_pysqlite
from sqlalchemy.sql import expression

from . import errors

# What a URL's query may say; anything else is refused (a misspelt option
# would otherwise be ignored). Other lith.dbapi.connect options go in
# create_engine(..., connect_args={...}).
_QUERY = {"token": str, "ca_file": str, "timeout": float}
_SCHEMES = {"lith": "http", "lith+http": "http", "lith+https": "https"}


class LithCompiler(SQLiteCompiler):
    if int(sqlalchemy.__version__.split(".")[0]) < 2:  # 1.4's raises CompileError; 2's has it
        def returning_clause(self, stmt, returning_cols, **kw):
            # SQLite's form, as PostgreSQL's: RETURNING after the VALUES, the
            # WHERE and any ON CONFLICT clause (returning_precedes_values is
            # False), columns labelled as a SELECT's
            return "RETURNING " + ", ".join(
                self._label_returning_column(stmt, c, fallback_label_name=c._non_anon_label)
                for c in expression._select_iterables(returning_cols))


class LithDialect(SQLiteDialect_pysqlite):
    driver = "lith"
    supports_statement_cache = True
    statement_compiler = LithCompiler
    _isolation_lookup = {"SERIALIZABLE": "", "AUTOCOMMIT": None}

    def __init__(self, implicit_returning=None, **kw):
        super().__init__(**kw)
        # None: as the server's SQLite allows (initialize); False: the user's
        self._implicit_returning_asked = implicit_returning

    @classmethod
    def dbapi(cls):  # SQLAlchemy 1.4's name
        from . import dbapi
        return dbapi

    @classmethod
    def import_dbapi(cls):  # SQLAlchemy 2's name
        from . import dbapi
        return dbapi

    @classmethod
    def get_pool_class(cls, url):
        return pool.QueuePool

    def create_connect_args(self, url):
        scheme = _SCHEMES.get(url.drivername)
        if scheme is None:
            raise exc.ArgumentError(f"{url.drivername}: the lith dialect's URLs are "
                                    f"{', '.join(s + '://' for s in _SCHEMES)}")
        if url.username:
            raise exc.ArgumentError("a lith URL carries the token as its password "
                                    "(lith://:TOKEN@HOST:PORT/), with no user name")
        query = dict(url.query)
        unknown = sorted(set(query) - set(_QUERY))
        if unknown:
            raise exc.ArgumentError(f"a lith URL's options are {', '.join(sorted(_QUERY))}, not "
                                    f"{', '.join(unknown)}; others go in connect_args")
        kwargs = {}
        for key, type_ in _QUERY.items():
            if key in query:
                value = query[key]
                if not isinstance(value, str):  # given twice: a tuple
                    raise exc.ArgumentError(f"{key} is given more than once")
                try:
                    kwargs[key] = type_(value)
                except ValueError:
                    raise exc.ArgumentError(f"{key}={value!r} is not a {type_.__name__}") from None
        if url.password is not None:
            if "token" in kwargs:
                raise exc.ArgumentError("the token is given twice: as the password and as ?token=")
            kwargs["token"] = url.password
        if url.database:
            kwargs["db"] = url.database
        address = None
        if url.host:
            host = f"[{url.host}]" if ":" in url.host else url.host
            address = f"{scheme}://{host}" + (f":{url.port}" if url.port else "")
        elif scheme == "https" or url.port:
            raise exc.ArgumentError("a lith URL without a host takes lith.dbapi's default "
                                    "address: it can have no port and no +https")
        return ([address], kwargs)

    def on_connect(self):
        # pysqlite's would register REGEXP with create_function (see above)
        if self.isolation_level is None:
            return None
        level = self.isolation_level

        def connect(dbapi_connection):
            self.set_isolation_level(dbapi_connection, level)
        return connect

    def set_isolation_level(self, connection, level):
        dbapi_connection = getattr(connection, "dbapi_connection", connection)
        try:
            dbapi_connection.isolation_level = self._isolation_lookup[level.replace("_", " ")]
        except KeyError:
            raise exc.ArgumentError(f"isolation_level {level!r}: lithd has "
                                    f"{' and '.join(self._isolation_lookup)}") from None

    def get_isolation_level(self, connection):
        dbapi_connection = getattr(connection, "dbapi_connection", connection)
        return "AUTOCOMMIT" if dbapi_connection.isolation_level is None else "SERIALIZABLE"

    def get_isolation_level_values(self, dbapi_connection):  # SQLAlchemy 2
        return list(self._isolation_lookup)

    def _get_server_version_info(self, connection):
        version = connection.connection.server_version()
        return tuple(int(p) for p in version.split(".")[:3] if p.isdigit())

    def initialize(self, connection):
        super().initialize(connection)
        returning = self.server_version_info >= (3, 35)
        self.full_returning = returning  # SQLAlchemy 1.4
        self.update_returning = self.delete_returning = self.insert_returning = returning  # 2
        self.implicit_returning = returning and self._implicit_returning_asked is not False

    def is_disconnect(self, e, connection, cursor):
        return isinstance(e, (errors.ConnectionFailed, errors.OutcomeUnknown)) or \
            super().is_disconnect(e, connection, cursor)


dialect = LithDialect
