"""TensorBoard event files of scalar curves (workdir/tensorboard), written here.

The format is small: TFRecord framing (length, masked CRC-32C of it, data, masked CRC-32C of the
data) around Event protocol buffers, of which a scalar curve needs five fields. tensorboardX, which
wrote them before, imports PyTorch whenever it is installed: 2.1 s and 220 MB more for every
training process (AMD EPYC, 2 cores). The bytes, tags included, are checked against tensorboardX's
own in the tests.
"""
import math
import os
import re
import socket
import struct
import time

FILE_VERSION = b"brain.Event:2"  # what TensorBoard needs to purge on a SessionLog START
SESSION_START = 1  # SessionLog.START: TensorBoard drops the points at or after its step
_NOT_IN_TAGS = re.compile(r"[^-/\w.]")  # TensorFlow's rule for a tag, which tensorboardX applied


def _crc32c_table():
  """CRC-32C (Castagnoli, reflected polynomial 0x82F63B78), one entry per byte value."""
  table = []
  for byte in range(256):
    crc = byte
    for _ in range(8):
      crc = (crc >> 1) ^ (0x82F63B78 if crc & 1 else 0)
    table.append(crc)
  return tuple(table)


_TABLE = _crc32c_table()


def crc32c(data):
  crc = 0xFFFFFFFF
  for byte in data:
    crc = _TABLE[(crc ^ byte) & 0xFF] ^ (crc >> 8)
  return crc ^ 0xFFFFFFFF


def masked_crc32c(data):
  """TFRecord's masked CRC: rotated right by 15 bits, plus a constant."""
  crc = crc32c(data)
  return (((crc >> 15) | (crc << 17)) + 0xA282EAD8) & 0xFFFFFFFF


def record(data):
  """One TFRecord holding `data`."""
  length = struct.pack("<Q", len(data))
  return (length + struct.pack("<I", masked_crc32c(length)) + data
          + struct.pack("<I", masked_crc32c(data)))


def _varint(n):
  n &= (1 << 64) - 1  # an int64 below 0 is its two's complement, ten bytes
  out = bytearray()
  while True:
    low, n = n & 0x7F, n >> 7
    if not n:
      out.append(low)
      return bytes(out)
    out.append(low | 0x80)


def _message(number, payload):
  """A length-delimited field (string, bytes or message) of protocol buffer field `number`."""
  return _varint(number << 3 | 2) + _varint(len(payload)) + payload


def event(wall_time, step, *, file_version=None, scalar=None, session_status=None):
  """An Event (tensorflow/core/util/event.proto): wall_time 1, step 2, file_version 3, summary 5
  (Summary.Value: tag 1, simple_value 2), session_log 7 (SessionLog.status 1). As protobuf
  serialises it: fields in number order, a zero step left out (proto3 default)."""
  out = b"\x09" + struct.pack("<d", wall_time)
  if step:
    out += b"\x10" + _varint(step)
  if file_version is not None:
    out += _message(3, file_version)
  if scalar is not None:
    tag, value = scalar
    try:
      packed = struct.pack("<f", value)
    except OverflowError:  # past float32's range: infinite, as protobuf stores it
      packed = struct.pack("<f", math.copysign(math.inf, value))
    out += _message(5, _message(1, _message(1, tag.encode()) + b"\x15" + packed))
  if session_status is not None:
    out += _message(7, b"\x08" + _varint(session_status))
  return out


def clean_tag(tag):
  """`tag` as TensorBoard takes it: `_` for each character other than letters, digits, `-`, `/`,
  `.` and `_`, no leading `/` (val/ndcg@1 is val/ndcg_1, as tensorboardX wrote it)."""
  return _NOT_IN_TAGS.sub("_", tag).lstrip("/")


class EventWriter:
  """Appends scalar points to a new event file in `logdir`. `purge_step`: the run's first step
  (a resumed run's: TensorBoard then hides the earlier run's points from that step on, as they
  were redone)."""

  def __init__(self, logdir, purge_step):
    os.makedirs(logdir, exist_ok=True)
    now = time.time()
    name = f"events.out.tfevents.{int(now):010d}.{socket.gethostname()}.{os.getpid()}"
    self._file = open(os.path.join(logdir, name), "ab")
    self._write(event(now, 0, file_version=FILE_VERSION))
    self._write(event(now, purge_step, file_version=FILE_VERSION))
    self._write(event(now, purge_step, session_status=SESSION_START))

  def _write(self, data):
    self._file.write(record(data))

  def add_scalar(self, tag, value, step):
    self._write(event(time.time(), step, scalar=(clean_tag(tag), float(value))))

  def flush(self):
    self._file.flush()

  def close(self):
    self._file.close()
