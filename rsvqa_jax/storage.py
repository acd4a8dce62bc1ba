"""Folders written whole or not at all, JSON manifests, content hashes.

Every cache entry, generated dataset and pretrained model shares these: a folder is built under
a temporary name and renamed into place only when complete (a killed run leaves at most a
`.tmp-*` folder, never a half entry under the real name), a manifest says what the folder holds,
and a reader that finds a manifest missing, malformed or of another version gets None and
rebuilds instead of trusting it.
"""
import contextlib
import ctypes
import errno
import fcntl
import hashlib
import json
import logging
import math
import os
import secrets
import shutil
import socket
import stat
import threading
import time

import numpy as np

from rsvqa_jax.errors import RSVQAError

_log = logging.getLogger(__name__)

MANIFEST = "manifest.json"
LOCK = ".lock"
DIGESTS_DIR = "file_digests"  # in a cache folder: file_digests indexes (sha256 + stat stamp)
_WRITING = set()  # the temporary files (replacing_path) and folders (building) being written
# Held while a temporary file or folder is put in place (_commit); remove_unfinished takes it for
# good, so nothing is put in place once an interrupt's cleanup has begun (a folder it was
# removing, renamed into place half deleted, would have passed for a finished dataset).
_COMMIT = threading.Lock()
# .active: this thread is in _commit; .after: what an interrupt's handler left for its end
_IN_COMMIT = threading.local()


@contextlib.contextmanager
def _commit():
  """The commit lock held over a block that puts files in place. An interrupt's handler landing
  inside it (after_commit) waits for the block's end: parked holding the lock, the main thread
  kept the watcher from ever ending the process."""
  _IN_COMMIT.active = True  # before the lock: a handler between the two defers too
  try:
    with _COMMIT:
      yield
  finally:
    _IN_COMMIT.active = False
    after = getattr(_IN_COMMIT, "after", [])
    while after:
      after.pop()()


def after_commit(action):
  """Runs `action` now, or at the end of the commit this thread is in (cli's interrupt handler,
  which parks the main thread)."""
  if getattr(_IN_COMMIT, "active", False):
    _IN_COMMIT.__dict__.setdefault("after", []).append(action)
  else:
    action()


@contextlib.contextmanager
def building(parent, name, replace=False):
  """Yields a fresh temporary folder; it becomes parent/name only if the block completes.

  If another process completed the same entry first, theirs is kept; with `replace`, an earlier
  parent/name is replaced instead (_replace), and the `.old-NAME-*` folders a killed replacement
  left are removed first.
  """
  os.makedirs(parent, exist_ok=True)
  if replace:
    for entry in os.listdir(parent):
      if entry.startswith(f".old-{name}-"):
        shutil.rmtree(os.path.join(parent, entry), ignore_errors=True)
  try:
    tmp = _fresh_folder(parent, f".tmp-{name}-")
  except OSError as e:  # named the temporary folder (`.tmp-NAME-x1y2`) the user never gave
    raise OSError(e.errno, e.strerror, os.path.join(parent, name)) from None
  target = os.path.join(parent, name)
  _WRITING.add(tmp)
  try:
    yield tmp
    try:
      with _commit():
        if replace:
          _replace(tmp, target)
        else:
          os.rename(tmp, target)
    except OSError:
      if replace or not os.path.isdir(target):
        raise
  except OSError as e:  # a full disk inside it: name the entry, not a folder removed below
    inside = isinstance(e.filename, str) and (e.filename + os.sep).startswith(tmp + os.sep)
    if not inside:
      raise
    raise OSError(e.errno, e.strerror, target + e.filename[len(tmp):]) from None
  finally:
    _WRITING.discard(tmp)
    if os.path.islink(tmp):  # a link `target` was, swapped in by _replace
      os.remove(tmp)
    shutil.rmtree(tmp, ignore_errors=True)


def _replace(new, target):
  """Puts folder `new` at `target`, and the earlier `target` (if any) at `new`, to be removed.
  Swapped in one step where the system can (exchange): two renames left a kill between them
  with nothing under the name, a dataset or benchmark lost to a Ctrl-C at the wrong moment."""
  if not os.path.lexists(target):
    os.rename(new, target)
  elif not exchange(new, target):
    parent, name = os.path.split(target)
    aside = os.path.join(parent, f".old-{name}-{os.getpid()}-{time.time_ns()}")
    os.rename(target, aside)
    os.rename(new, target)
    os.rename(aside, new)


_AT_FDCWD, _RENAME_EXCHANGE = -100, 2  # <fcntl.h>, <linux/fs.h>
_NO_EXCHANGE = (errno.ENOSYS, errno.EINVAL, errno.ENOTSUP, errno.EOPNOTSUPP)


def exchange(a, b):
  """Swaps the entries at paths a and b atomically (Linux renameat2 RENAME_EXCHANGE); False
  where this system or file system has no such call, and nothing changed."""
  try:
    renameat2 = ctypes.CDLL(None, use_errno=True).renameat2
  except (AttributeError, OSError):
    return False
  renameat2.argtypes = [ctypes.c_int, ctypes.c_char_p, ctypes.c_int, ctypes.c_char_p, ctypes.c_uint]
  if renameat2(_AT_FDCWD, os.fsencode(a), _AT_FDCWD, os.fsencode(b), _RENAME_EXCHANGE) == 0:
    return True
  code = ctypes.get_errno()
  if code in _NO_EXCHANGE:
    return False
  raise OSError(code, os.strerror(code), b)


def _fresh_folder(parent, prefix):
  """A new folder parent/PREFIX<random>, made with the permissions the umask gives: mkdtemp's
  are 0700, so a dataset, benchmark or cache entry built in one was unreadable to the group of
  users sharing it."""
  while True:
    path = os.path.join(parent, prefix + secrets.token_hex(4))
    try:
      os.mkdir(path)
      return path
    except FileExistsError:
      continue


OWNER = ".owner.json"  # in a building_owned folder: the pid and host building it
# A temporary folder without an owner file this old is a dead run's (building_owned), as is a
# `PATH.tmp-TOKEN-PID-HOST` file of this host this old whose process is gone (replacing_path).
STALE_SECONDS = 60


@contextlib.contextmanager
def building_owned(parent, name, replace=False):
  """building() for an entry written by one run, not a shared cache (a dataset, a benchmark
  folder): the folder names its builder (OWNER) while it is built, and the `.tmp-NAME-*`
  folders a killed build left beside it are removed first, a live build's kept."""
  os.makedirs(parent, exist_ok=True)
  _remove_dead_builds(parent, f".tmp-{name}-")
  with building(parent, name, replace) as tmp:
    owner = _claim(tmp)
    yield tmp
    os.remove(owner)


def _remove_dead_builds(parent, prefix):
  """Removes the folders parent/PREFIX* that a dead run was building (_dead_build)."""
  for entry in os.listdir(parent):
    path = os.path.join(parent, entry)
    if entry.startswith(prefix) and os.path.isdir(path) and _dead_build(path):
      shutil.rmtree(path, ignore_errors=True)


def _claim(folder):
  """Writes folder/OWNER, this process's pid and host, which _dead_build reads; its path."""
  owner = os.path.join(folder, OWNER)
  write_json(owner, {"pid": os.getpid(), "host": socket.gethostname()})
  return owner


@contextlib.contextmanager
def staged(out, owned=()):
  """Yields (folder, final): files written into `folder` move into `out` once the block completes,
  and final(path) is where a path written there ends up. A set of outputs (an analysis's tables
  and figure) so replaces the last one whole or not at all: a full disk or a kill part-way left
  new tables beside old ones, and nothing told them apart. `owned`: names (relative to `out`)
  of the set's files that this one may not write (a table only some datasets get); an earlier
  set's are removed then. The `.tmp-staged-*` folder a killed run left in `out` is removed by
  the next one."""
  os.makedirs(out, exist_ok=True)
  _remove_dead_builds(out, ".tmp-staged-")
  tmp = _fresh_folder(out, ".tmp-staged-")
  _WRITING.add(tmp)
  try:
    owner = _claim(tmp)
    yield tmp, lambda path: os.path.join(out, os.path.relpath(path, tmp))
    os.remove(owner)
    written = set()
    with _commit():
      for folder, _, files in os.walk(tmp):
        into = os.path.join(out, os.path.relpath(folder, tmp))
        os.makedirs(into, exist_ok=True)
        for name in files:
          os.replace(os.path.join(folder, name), os.path.join(into, name))
          written.add(os.path.normpath(os.path.join(into, name)))
    for name in owned:
      if os.path.normpath(os.path.join(out, name)) not in written:
        remove(os.path.join(out, name))
  finally:
    _WRITING.discard(tmp)
    shutil.rmtree(tmp, ignore_errors=True)


def _alive(pid):
  """Whether process `pid` (a number, or its digits) runs on this host; False for what is no
  pid, True for another user's process (not ours to judge)."""
  try:
    os.kill(int(pid), 0)
  except (ProcessLookupError, OverflowError, ValueError):
    return False
  except OSError:  # another user's process
    return True
  return True


def _dead_build(path):
  """Whether build folder `path` is a dead run's: its owner process is gone from this host, or
  it has no owner file and is older than STALE_SECONDS (a run on another host is left alone)."""
  owner = read_json(os.path.join(path, OWNER))
  if not isinstance(owner, dict):
    try:
      return time.time() - os.stat(path).st_mtime > STALE_SECONDS
    except FileNotFoundError:
      return False
  pid = owner.get("pid")
  if owner.get("host") != socket.gethostname() or not isinstance(pid, int):
    return False
  return not _alive(pid)


@contextlib.contextmanager
def building_alone(parent, name):
  """Holds the lock of entry parent/name for the block: one process builds it at a time.

  Two processes that found the entry missing would otherwise both build it (the first rename
  wins, the work is doubled). The lock is an flock on parent/.NAME.lock, released by the system
  when its process dies however it dies; a second builder waits for it, saying so, and must look
  for the entry again once it holds the lock. Only the holder builds the entry, so the
  `.tmp-NAME-*` folders left here by killed builds are removed (building() leaves at most those).
  """
  os.makedirs(parent, exist_ok=True)
  fd = os.open(os.path.join(parent, f".{name}.lock"), os.O_RDWR | os.O_CREAT, 0o644)
  try:
    try:
      fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except BlockingIOError:
      _log.info("%s: waiting for another process's build of it", os.path.join(parent, name))
      fcntl.flock(fd, fcntl.LOCK_EX)
    for entry in os.listdir(parent):
      if entry.startswith(f".tmp-{name}-"):
        shutil.rmtree(os.path.join(parent, entry), ignore_errors=True)
    yield
  finally:
    os.close(fd)  # releases the flock


def cached(parent, name, open_entry, build, what):
  """The cache entry parent/name: opened when complete, else built by one process at a time.

  `open_entry(path)` returns the entry, or None when it is incomplete or corrupted; `build(tmp)`
  writes it into a folder that becomes parent/name once complete (`building`). A second process
  that finds it missing waits for the first one's build and opens that (`building_alone`); an
  incomplete or corrupted entry is named in a WARNING and built again.
  """
  path = os.path.join(parent, name)
  entry = open_entry(path) if os.path.isdir(path) else None
  if entry is not None:
    _log.debug("%s: %s read from the cache", path, what)
    return entry
  with building_alone(parent, name):
    if os.path.isdir(path):
      entry = open_entry(path)
      if entry is not None:  # built while this one waited
        _log.debug("%s: %s read from the cache (another process built it)", path, what)
        return entry
      _log.warning("%s: incomplete or corrupted %s, recomputing", path, what)
      shutil.rmtree(path, ignore_errors=True)
    started = time.time()
    with building(parent, name) as tmp:
      build(tmp)
  entry = open_entry(path)
  if entry is None:
    raise RSVQAError(f"{path}: {what} unreadable right after writing it")
  _log.debug("%s: %s built (%.1fs)", path, what, time.time() - started)
  return entry


@contextlib.contextmanager
def locked(folder, what):
  """Holds folder/.lock for the block: one run at a time per folder.

  The lock is an flock on the file, which the system releases when its process dies however it
  dies, so a killed run never blocks the next one; the file holds the owner's PID and host for
  the messages. A second run on the folder is refused with a one-line error naming the owner; a
  run that finds the record of a process that died holding the lock says it takes it over.
  """
  os.makedirs(folder, exist_ok=True)
  path = os.path.join(folder, LOCK)
  fd = os.open(path, os.O_RDWR | os.O_CREAT, 0o644)
  try:
    try:
      fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except BlockingIOError:
      owner = _owner(fd)
      raise RSVQAError(f"{folder}: in use by {what} PID {owner.get('pid', '?')} on "
                       f"{owner.get('host', '?')} since {owner.get('since', '?')}; wait for it to "
                       "end") from None
    previous = _owner(fd)
    if previous:
      _log.warning("%s: taking over the lock of %s PID %s, which ended without releasing it "
                   "(killed?)", folder, what, previous.get("pid", "?"))
    me = {"pid": os.getpid(), "host": socket.gethostname(),
          "since": time.strftime("%Y-%m-%dT%H:%M:%S")}
    _record(fd, json.dumps(me).encode())
    _HELD.add(fd)
    try:
      yield
    finally:
      _HELD.discard(fd)
      _record(fd, b"")
  finally:
    os.close(fd)  # releases the flock


_HELD = set()  # descriptors of the locks this process holds, their records written


def clear_held_locks():
  """Empties the owner record of every lock this process holds.

  The interrupt handler (cli.exit_on_interrupt) calls it just before it ends the process with
  os._exit, which skips the `finally` of `locked`: the next run then resumes without a WARNING
  that the owner died holding the lock. A kill -9 still leaves the record, and that WARNING.
  """
  for fd in list(_HELD):
    try:
      _record(fd, b"")
    except OSError:
      pass


def remove(path):
  """Removes file `path` if it is there."""
  try:
    os.remove(path)
  except FileNotFoundError:
    pass


def lock_holder(folder):
  """The record ({pid, host, since}) of another process holding folder/.lock (a run writing
  there now), or None: readers say what they read mid-run. Tested without waiting or writing."""
  path = os.path.join(folder, LOCK)
  try:
    fd = os.open(path, os.O_RDONLY)
  except OSError:
    return None
  try:
    try:
      fcntl.flock(fd, fcntl.LOCK_SH | fcntl.LOCK_NB)
    except BlockingIOError:
      owner = _owner(fd)  # {} while the holder has yet to write its record: a holder still
      return None if owner.get("pid") == os.getpid() else owner or {"pid": "?", "since": "?"}
    fcntl.flock(fd, fcntl.LOCK_UN)
    return None
  finally:
    os.close(fd)


def _owner(fd):
  os.lseek(fd, 0, os.SEEK_SET)
  try:
    owner = json.loads(os.read(fd, 4096) or b"{}")
  except ValueError:
    return {}
  return owner if isinstance(owner, dict) else {}


def _record(fd, blob):
  os.ftruncate(fd, 0)
  os.pwrite(fd, blob, 0)


@contextlib.contextmanager
def writing_npy(path, shape):
  """Yields write(rows): a float32 .npy of `shape` written block by block with plain writes,
  whose rows must add up to shape[0]. A full disk is then an OSError naming `path`; a memory map
  written onto one ends the process with SIGBUS, no message at all."""
  shape = tuple(int(d) for d in shape)
  written = 0

  def write(rows):
    nonlocal written
    rows = np.ascontiguousarray(rows, "<f4")
    if rows.shape[1:] != shape[1:]:
      raise ValueError(f"{path}: rows of shape {rows.shape[1:]}, expected {shape[1:]}")
    f.write(rows.tobytes())
    written += len(rows)

  try:
    with open(path, "wb") as f:
      np.lib.format.write_array_header_1_0(
          f, {"descr": "<f4", "fortran_order": False, "shape": shape})
      yield write
  except OSError as e:
    if e.filename is None:
      raise OSError(e.errno, e.strerror, path) from None
    raise
  if written != shape[0]:
    raise ValueError(f"{path}: {written} rows written, expected {shape[0]}")


def check_writable(folder):
  """Raises the OSError a write into existing folder `folder` would (a read-only file system, no
  permission), before the work whose results go there: evaluate computed every prediction of a
  read-only workdir first."""
  if os.path.isdir(folder) and not os.access(folder, os.W_OK):
    code = errno.EROFS if os.statvfs(folder).f_flag & os.ST_RDONLY else errno.EACCES
    raise OSError(code, os.strerror(code), folder)


def ensure_free(folder, nbytes, what,
                advice="free some space and run the same command again (it resumes)"):
  """One-line RSVQAError, naming the folder and the bytes needed, unless `nbytes` fit there.

  Checked before a large write rather than caught after it: a memory-mapped array written onto
  a full disk ends the process with SIGBUS, and a background checkpoint commit that fails
  leaves only a traceback in its thread. `advice`: what the user can do.
  """
  os.makedirs(folder, exist_ok=True)
  free = shutil.disk_usage(folder).free
  if free < nbytes:
    raise RSVQAError(f"{folder}: no space for {what}: it needs about {_size(nbytes)}, "
                     f"{_size(free)} are free; {advice}")


def _size(nbytes):
  for unit in ("bytes", "KB", "MB", "GB", "TB"):
    if nbytes < 1024 or unit == "TB":
      return f"{nbytes:.0f} {unit}" if unit == "bytes" else f"{nbytes:,.1f} {unit}"
    nbytes /= 1024


def read_json(path):
  """The parsed JSON file, or None when it is missing or malformed (nested too deep included)."""
  try:
    with open(path, encoding="utf-8") as f:
      return json.load(f)
  except (OSError, ValueError, RecursionError):
    return None


WRITE_ERRNOS = (errno.ENOSPC, errno.EDQUOT, errno.EFBIG, errno.EIO)  # a write itself failed


@contextlib.contextmanager
def replacing_path(path):
  """Yields a temporary path (`PATH.tmp-TOKEN-PID-HOST`) to write, renamed to `path` only when
  the block completes; an error writing it names `path`, the file the user knows. The temporary
  files a killed writer on this host left (its process gone, the file untouched for
  STALE_SECONDS) are removed first; another host's are left alone, whatever its clock says. An
  interrupt removes this one (remove_unfinished) before it ends the process. A path that is a
  device, pipe or socket (`--out /dev/stdout`) is refused: the rename would put a file in its
  place (a /dev/full replaced so stayed a file for every later process)."""
  try:
    kind = os.stat(path).st_mode
  except OSError:  # none yet (or unreadable: the write will say so)
    kind = None
  if kind is not None and not (stat.S_ISREG(kind) or stat.S_ISDIR(kind)):
    raise RSVQAError(f"{path}: not a regular file (a device, pipe or socket); give the path of a "
                     "file to write")
  _remove_dead_writers(path)
  tmp = f"{path}.tmp-{secrets.token_hex(4)}-{os.getpid()}-{socket.gethostname()}"
  _WRITING.add(tmp)
  try:
    yield tmp
    with _commit():
      os.replace(tmp, path)
  except OSError as e:
    # A full disk while the block writes or closes the file names none (a text file's flush,
    # PIL's close of a PNG: "a file: no space left on device").
    unnamed = e.filename is None and e.errno in (errno.ENOSPC, errno.EDQUOT, errno.EFBIG)
    if not unnamed and tmp not in (e.filename, e.filename2):
      raise
    raise OSError(e.errno, e.strerror, path) from None
  finally:
    _WRITING.discard(tmp)
    with contextlib.suppress(OSError):
      remove(tmp)


@contextlib.contextmanager
def replacing(path, **open_kwargs):
  """Yields a text file that becomes `path` only when the block completes (readers, and a run
  that was killed, never see half a file)."""
  with replacing_path(path) as tmp:
    with open(tmp, "w", encoding="utf-8", **open_kwargs) as f:
      yield f


def _remove_dead_writers(path):
  """Removes the temporary files of `path` (replacing_path) that a dead process on this host
  left; one it cannot remove (another user's) stays."""
  folder, name = os.path.split(os.path.abspath(path))
  prefix, host = f"{name}.tmp-", socket.gethostname()
  try:
    entries = os.listdir(folder)
  except OSError:
    return
  for entry in entries:
    fields = entry[len(prefix):].split("-", 2)  # TOKEN, PID, HOST (which may hold a "-")
    if not (entry.startswith(prefix) and len(fields) == 3 and fields[2] == host
            and fields[1].isdigit() and fields[1].isascii()) or int(fields[1]) == os.getpid():
      continue
    full = os.path.join(folder, entry)
    try:
      recent = time.time() - os.lstat(full).st_mtime <= STALE_SECONDS
    except OSError:  # gone meanwhile
      continue
    if not recent and not _alive(fields[1]):
      with contextlib.suppress(OSError):
        remove(full)


def remove_unfinished():
  """Removes the temporary files and folders this process is writing (replacing_path,
  building): the interrupt handler (cli.exit_on_interrupt) calls it just before os._exit, which
  skips their cleanup (a synthetic dataset's whole folder stayed until the next build). The
  commit lock it takes is never given back: a thread still writing puts nothing in place."""
  _COMMIT.acquire()  # pylint: disable=consider-using-with
  for tmp in list(_WRITING):
    if os.path.isdir(tmp) and not os.path.islink(tmp):
      shutil.rmtree(tmp, ignore_errors=True)
    else:
      with contextlib.suppress(OSError):
        remove(tmp)


def json_safe(value):
  """`value` with every NaN or infinite float as None, recursively: JSON has no such numbers,
  and a file holding them bare (`NaN`, what Python writes by default) is refused by strict
  readers (jq, JavaScript, most other languages). Readers of our result files turn the null of a
  number back into NaN (bias/metrics.from_json)."""
  if isinstance(value, dict):
    return {k: json_safe(v) for k, v in value.items()}
  if isinstance(value, (list, tuple)):
    return [json_safe(v) for v in value]
  if isinstance(value, float) and not math.isfinite(value):
    return None
  return value


def json_line(value):
  """`value` as one line of strict JSON (json_safe), for JSON-lines files."""
  return json.dumps(json_safe(value), allow_nan=False)


def write_json(path, value, *, sort_keys=False):
  """Writes `value` as strict JSON (json_safe: null where there is no number) through a
  temporary file, so readers never see half a file."""
  with replacing(path) as f:
    json.dump(json_safe(value), f, indent=1, sort_keys=sort_keys, allow_nan=False)


def read_manifest(folder, name=MANIFEST, **expected):
  """folder/name as a dict if it parses and each `expected` key has that value, else None."""
  manifest = read_json(os.path.join(folder, name))
  if not isinstance(manifest, dict):
    return None
  if any(manifest.get(k) != v for k, v in expected.items()):
    return None
  return manifest


@contextlib.contextmanager
def npz(path, **kwargs):
  """np.load of an .npz archive whose file is closed whatever happens: np.load leaves the
  file it opened open when the archive is cut (a ResourceWarning per damaged file read)."""
  with open(path, "rb") as f, np.load(f, **kwargs) as archive:
    yield archive


def file_sha256(path):
  """sha256 hex digest of a file's bytes."""
  with open(path, "rb") as f:
    return hashlib.file_digest(f, "sha256").hexdigest()


def path_sha256(path):
  """sha256 of a file, or of a folder's relative file names and their contents' hashes."""
  if os.path.isfile(path):
    return file_sha256(path)
  h = hashlib.sha256()
  for folder, dirs, files in sorted(os.walk(path)):
    dirs.sort()
    for name in sorted(files):
      full = os.path.join(folder, name)
      h.update(f"{os.path.relpath(full, path)}:{file_sha256(full)};".encode())
  return h.hexdigest()


def file_digests(paths, index_path):
  """sha256 of each file's contents, computed once per file and kept in `index_path`.

  A kept digest is reused while the file's size, mtime, ctime and inode are unchanged. ctime
  cannot be set back by a user (utime sets only atime and mtime), so a file rewritten with the
  same size and mtime is hashed again, never mistaken for the old one. A file changed in the
  last MEMO_SETTLE_SECONDS is hashed but not kept: a rewrite within the same tick of a coarse
  file-system clock would keep its stamp (git's "racily clean" entries). The index is only a
  memo: a damaged one (not an object, a row of another shape) is recomputed, one that cannot be
  written (a read-only or full cache) is said at DEBUG and the files hashed again next time, and
  rows of files that are gone are dropped whenever it is rewritten.
  """
  index = read_json(index_path)
  index = index if isinstance(index, dict) else {}
  out, changed = [], False
  for path in paths:
    full = os.path.abspath(path)
    st = os.stat(full)
    stamp = [st.st_size, st.st_mtime_ns, st.st_ctime_ns, st.st_ino]
    kept = index.get(full)
    if not (isinstance(kept, list) and len(kept) == 5 and kept[:4] == stamp
            and isinstance(kept[4], str)):
      kept = stamp + [file_sha256(full)]
      if time.time_ns() - max(st.st_mtime_ns, st.st_ctime_ns) > MEMO_SETTLE_SECONDS * 1e9:
        index[full] = kept
        changed = True
    out.append(kept[4])
  if changed:
    try:
      os.makedirs(os.path.dirname(os.path.abspath(index_path)), exist_ok=True)
      write_json(index_path, {k: v for k, v in index.items() if os.path.exists(k)})
    except OSError as e:
      _log.debug("%s: not kept (%s); the files are hashed again next time", index_path,
                e.strerror or e)
  return out


# A file changed this recently is not kept in a file_digests index (coarse clocks tick in 1 s
# or, on FAT, 2 s).
MEMO_SETTLE_SECONDS = 3


def identity_key(identity):
  """Short stable hash of a JSON-able identity dict (a cache entry's name ends in it)."""
  blob = json.dumps(identity, sort_keys=True, separators=(",", ":")).encode()
  return hashlib.sha256(blob).hexdigest()[:20]


def entry_digests(entry):
  """The file_digests index of the arrays of the cache entries beside folder `entry`."""
  return os.path.join(os.path.dirname(os.path.abspath(entry)), DIGESTS_DIR, "cache_entries")


def open_array(path, shape, sha256=None, digests=None):
  """Read-only float32 memmap of a .npy with this exact shape (and checksum), else None.

  With `digests` (a file_digests index), the checksum of a file unchanged since it was last
  hashed is not computed again: a cache entry's map of gigabytes is read once, not at every open.
  """
  try:
    arr = np.load(path, mmap_mode="r")
  except (OSError, ValueError):
    return None
  if arr.dtype != np.float32 or arr.shape != tuple(shape):
    return None
  if sha256 is not None:
    found = file_digests([path], digests)[0] if digests else file_sha256(path)
    if found != sha256:
      return None
  return arr
