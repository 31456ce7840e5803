"""A PEP 517 build backend for the lith client, in the standard library.

Why not setuptools: pip would first download it into an isolated build
environment, and the client must install where no package index is
reachable (CI, air-gapped hosts). The package is pure Python in one folder
(src/lith), so a wheel is a zip of it with the metadata PEP 427 asks for.
pyproject.toml's [project] table is read for the name, version, summary and
Python requirement (a few `key = "value"` lines; tomllib is 3.11+ only),
and its [project.entry-points."GROUP"] tables for the wheel's
entry_points.txt (SQLAlchemy finds the lith dialect there).
"""
import base64
import hashlib
import io
import os
import re
import tarfile
import zipfile

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def _project():
    with open(os.path.join(ROOT, "pyproject.toml"), encoding="utf-8") as f:
        text = f.read()
    section = text.split("[project]", 1)[1].split("\n[", 1)[0]
    return dict(re.findall(r'^([\w-]+)\s*=\s*"([^"]*)"', section, re.M))


def _entry_points():
    """entry_points.txt's text: each [project.entry-points."GROUP"] table,
    its `name = "module:object"` lines (names bare or quoted)."""
    with open(os.path.join(ROOT, "pyproject.toml"), encoding="utf-8") as f:
        text = f.read()
    out = []
    for group, body in re.findall(r'^\[project\.entry-points\."([^"]+)"\]\n((?:(?!\[).*\n?)*)', text, re.M):
        out.append(f"[{group}]")
        out += [f"{k1 or k2} = {v}" for k1, k2, v in
                re.findall(r'^(?:"([^"]+)"|([\w.-]+))\s*=\s*"([^"]*)"', body, re.M)]
        out.append("")
    return "\n".join(out)


def _metadata(p):
    return (
        "Metadata-Version: 2.1\n"
        f"Name: {p['name']}\n"
        f"Version: {p['version']}\n"
        f"Summary: {p['description']}\n"
        f"Requires-Python: {p['requires-python']}\n"
        f"License: {p.get('license', '')}\n"
    )


def _package_files():
    src = os.path.join(ROOT, "src")
    for folder, dirs, files in os.walk(src):
        dirs[:] = sorted(d for d in dirs if d != "__pycache__")
        for name in sorted(files):
            if name.endswith((".py", ".typed")):
                full = os.path.join(folder, name)
                yield os.path.relpath(full, src).replace(os.sep, "/"), full


def _wheel(wheel_directory, entries):
    p = _project()
    dist_info = f"{p['name']}-{p['version']}.dist-info"
    name = f"{p['name']}-{p['version']}-py3-none-any.whl"
    entries = list(entries) + [
        (f"{dist_info}/METADATA", _metadata(p).encode()),
        (f"{dist_info}/WHEEL",
         b"Wheel-Version: 1.0\nGenerator: lith_build\nRoot-Is-Purelib: true\nTag: py3-none-any\n"),
    ]
    entry_points = _entry_points()
    if entry_points:
        entries.append((f"{dist_info}/entry_points.txt", entry_points.encode()))
    record = io.StringIO()
    with zipfile.ZipFile(os.path.join(wheel_directory, name), "w", zipfile.ZIP_DEFLATED) as z:
        for arcname, data in entries:
            z.writestr(arcname, data)
            digest = base64.urlsafe_b64encode(hashlib.sha256(data).digest()).rstrip(b"=").decode()
            record.write(f"{arcname},sha256={digest},{len(data)}\n")
        record.write(f"{dist_info}/RECORD,,\n")
        z.writestr(f"{dist_info}/RECORD", record.getvalue())
    return name


def get_requires_for_build_wheel(config_settings=None):
    return []


def get_requires_for_build_sdist(config_settings=None):
    return []


def get_requires_for_build_editable(config_settings=None):
    return []


def build_wheel(wheel_directory, config_settings=None, metadata_directory=None):
    files = []
    for arcname, full in _package_files():
        with open(full, "rb") as f:
            files.append((arcname, f.read()))
    return _wheel(wheel_directory, files)


def build_editable(wheel_directory, config_settings=None, metadata_directory=None):
    """pip install -e: a .pth file that puts src/ on the path."""
    return _wheel(wheel_directory, [("lith_editable.pth", (os.path.join(ROOT, "src") + "\n").encode())])


def build_sdist(sdist_directory, config_settings=None):
    p = _project()
    base = f"{p['name']}-{p['version']}"
    name = base + ".tar.gz"
    with tarfile.open(os.path.join(sdist_directory, name), "w:gz") as t:
        for rel in ["pyproject.toml", "README.md", "_build/lith_build.py"]:
            t.add(os.path.join(ROOT, rel), arcname=f"{base}/{rel}")
        for arcname, full in _package_files():
            t.add(full, arcname=f"{base}/src/{arcname}")
        info = tarfile.TarInfo(f"{base}/PKG-INFO")
        data = _metadata(p).encode()
        info.size = len(data)
        t.addfile(info, io.BytesIO(data))
    return name
