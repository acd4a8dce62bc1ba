"""TensorBoard event files written by rsvqa_jax.train.tensorboard_events: the same bytes as
tensorboardX's protocol buffers and CRC, a file TensorBoard's record framing reads back."""
import struct

import pytest
from tensorboardX import crc32c as tbx_crc32c  # the test extra installs it: the reference
from tensorboardX import record_writer as tbx_record
from tensorboardX import summary as tbx_summary
from tensorboardX.proto import event_pb2, summary_pb2

from rsvqa_jax.train import tensorboard_events as tb


def test_crc32c_of_the_standard_check_string_and_of_tensorboardx():
  assert tb.crc32c(b"123456789") == 0xE3069283  # RFC 3720's check value for CRC-32C
  assert tb.crc32c(b"") == 0
  for data in (b"a", b"\x00" * 32, bytes(range(256)) * 3):
    assert tb.crc32c(data) == tbx_crc32c.crc32c(data)
    assert tb.masked_crc32c(data) == tbx_record.masked_crc32c(data)


@pytest.mark.parametrize("step", [0, 1, 127, 128, 300, 2 ** 40, -5])  # -5: an int64's ten bytes
def test_events_serialise_as_protobuf_does(step):
  reference = event_pb2.Event(wall_time=1765000000.25, step=step, file_version="brain.Event:2")
  assert tb.event(1765000000.25, step, file_version=tb.FILE_VERSION) == (
      reference.SerializeToString())
  reference = event_pb2.Event(wall_time=3.5, step=step, session_log=event_pb2.SessionLog(
      status=event_pb2.SessionLog.START))
  assert tb.event(3.5, step, session_status=tb.SESSION_START) == reference.SerializeToString()
  for value in (0.0, -1.5, 0.8125, 1e30, 1e39, -1e39):  # past float32's range: +-inf
    reference = event_pb2.Event(wall_time=2.0, step=step, summary=summary_pb2.Summary(
        value=[summary_pb2.Summary.Value(tag="val/oa", simple_value=value)]))
    assert tb.event(2.0, step, scalar=("val/oa", value)) == reference.SerializeToString()


@pytest.mark.parametrize("tag", ["val/oa", "val/ndcg@1", "/val/a b", "x:y", "//a", "é/ü"])
def test_tags_are_cleaned_as_tensorboardx_cleaned_them(tag):
  """Answerability's val/ndcg@1 curve was val/ndcg_1 in tensorboardX's files: a resumed run would
  have split it over two tags."""
  assert tb.clean_tag(tag) == tbx_summary.scalar(tag, 1.0).value[0].tag


def _records(path):
  """The data of each TFRecord of `path`, both CRCs checked."""
  out, data = [], path.read_bytes()
  while data:
    length = data[:8]
    (n,), (crc,) = struct.unpack("<Q", length), struct.unpack("<I", data[8:12])
    assert crc == tb.masked_crc32c(length)
    body, (body_crc,) = data[12:12 + n], struct.unpack("<I", data[12 + n:16 + n])
    assert body_crc == tbx_record.masked_crc32c(body)
    out.append(body)
    data = data[16 + n:]
  return out


def scalars(folder):
  """{tag: [(step, value)]} of every event file in `folder`."""
  out = {}
  for path in sorted(folder.iterdir()):
    for e in map(event_pb2.Event.FromString, _records(path)):
      for v in e.summary.value:
        out.setdefault(v.tag, []).append((e.step, v.simple_value))
  return out


def test_a_resumed_runs_file_purges_the_redone_steps_and_holds_its_points(tmp_path):
  writer = tb.EventWriter(str(tmp_path / "tensorboard"), purge_step=41)
  writer.add_scalar("train/loss", 0.5, 41)
  writer.add_scalar("val/ndcg@1", 1, 50)
  writer.flush()
  writer.close()
  (path,) = (tmp_path / "tensorboard").iterdir()
  assert path.name.startswith("events.out.tfevents.")  # the name TensorBoard looks for
  events = [event_pb2.Event.FromString(r) for r in _records(path)]
  assert [e.file_version for e in events[:2]] == ["brain.Event:2"] * 2
  assert events[1].step == 41 and events[2].step == 41
  assert events[2].session_log.status == event_pb2.SessionLog.START
  assert [(e.step, e.summary.value[0].tag, e.summary.value[0].simple_value)
          for e in events[3:]] == [(41, "train/loss", 0.5), (50, "val/ndcg_1", 1.0)]
  assert all(e.wall_time > 1.7e9 for e in events)


def test_a_file_is_byte_for_byte_what_tensorboardx_wrote(tmp_path, monkeypatch):
  """The same points at the same clock: the same file, purge events included."""
  from tensorboardX import SummaryWriter  # pylint: disable=g-import-not-at-top
  monkeypatch.setattr("time.time", lambda: 1765000000.5)
  theirs = SummaryWriter(str(tmp_path / "theirs"), purge_step=7)
  ours = tb.EventWriter(str(tmp_path / "ours"), purge_step=7)
  for writer in (theirs, ours):
    writer.add_scalar("train/loss", 0.25, 7)
    writer.add_scalar("val/map@3", 0.5, 9)
    writer.close()
  (theirs_file,), (ours_file,) = (tmp_path / "theirs").iterdir(), (tmp_path / "ours").iterdir()
  assert ours_file.read_bytes() == theirs_file.read_bytes()
