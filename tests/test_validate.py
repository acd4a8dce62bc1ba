"""`rsvqa-jax synth` + `rsvqa-jax validate` end to end through the CLI, and bad images."""
import json
import logging
import os
import pathlib
import re
import shutil
import struct

import numpy as np
import pytest
import tifffile
from PIL import Image

from rsvqa_jax import cli
from rsvqa_jax.data import images
from rsvqa_jax.data import rsvqa_json
from rsvqa_jax.data import validate
from rsvqa_jax.errors import RSVQAError


@pytest.fixture(scope="module")
def lr(tmp_path_factory):
  out = str(tmp_path_factory.mktemp("lr") / "data")
  assert cli.main(["synth", "--out", out, "--variant", "lr", "--images", "6", "--seed", "1",
                   "--questions-per-image", "10"]) == 0
  return out


@pytest.fixture
def broken(lr, tmp_path):
  root = str(tmp_path / "copy")
  shutil.copytree(lr, root)
  return root


def test_synth_then_validate_lr(lr, capsys):
  capsys.readouterr()
  assert cli.main(["validate", "--data", lr]) == 0
  out = capsys.readouterr().out
  report = validate.validate(lr)
  assert sum(report.questions.values()) == 60 and sum(report.images.values()) == 6
  assert "dataset lr" in out and "answer vocabulary (train):" in out and out.strip().endswith("ok")
  for split, n in report.questions.items():
    assert sum(report.by_type[split].values()) == n
  questions_line = next(line for line in out.splitlines() if line.startswith("questions"))
  assert questions_line.split()[1:] == [str(n) for n in report.questions.values()]


def test_synth_then_validate_hr(tmp_path, capsys):
  out = str(tmp_path / "hr")
  assert cli.main(["synth", "--out", out, "--variant", "hr", "--images", "5", "--questions-per-image", "8",
                   "--prior-strength", "0"]) == 0
  assert cli.main(["validate", "--data", out, "--dataset", "hr"]) == 0
  text = capsys.readouterr().out
  assert "test_phili" in text and "area" in text


def test_synth_rejects_bad_arguments(tmp_path, capsys):
  assert cli.main(["synth", "--out", str(tmp_path / "x"), "--images", "2"]) == 2
  err = capsys.readouterr().err.strip()
  assert err.count("\n") == 0 and "at least 3 images" in err
  with pytest.raises(SystemExit):
    cli.main(["synth", "--out", str(tmp_path / "y"), "--balanced", "--prior-strength", "0.5"])


def _run_validate(root, capsys, *flags):
  capsys.readouterr()
  rc = cli.main(["validate", "--data", root, "--dataset", "lr", *flags])
  err = capsys.readouterr().err.strip()
  return rc, err


def test_validate_missing_image(broken, capsys):
  path = os.path.join(broken, "Images_LR", "4.tif")
  os.remove(path)
  rc, err = _run_validate(broken, capsys)
  assert rc == 2 and err == f"rsvqa-jax validate: error: {path}: image file missing"


def test_validate_wrong_size(broken, capsys):
  path = os.path.join(broken, "Images_LR", "2.tif")
  tifffile.imwrite(path, np.zeros((128, 256, 3), np.uint8), photometric="rgb")
  rc, err = _run_validate(broken, capsys)
  assert rc == 2 and err == f"rsvqa-jax validate: error: {path}: image is 128x256, expected 256x256"


@pytest.mark.parametrize("array", [np.zeros((256, 256), np.uint8), np.zeros((256, 256, 4), np.uint8),
                                   np.zeros((2, 256, 256), np.uint8)])
def test_validate_wrong_band_count(broken, capsys, array):
  path = os.path.join(broken, "Images_LR", "0.tif")
  tifffile.imwrite(path, array)
  rc, err = _run_validate(broken, capsys)
  assert rc == 2 and err.startswith(f"rsvqa-jax validate: error: {path}: image has ")
  assert re.search(r"bands?, expected 3", err) and "\n" not in err


@pytest.mark.parametrize("flags", [(), ("--headers-only",)])
def test_a_folder_in_place_of_a_tile_is_one_plain_line(broken, capsys, flags):
  """It read "not a readable TIFF (IsADirectoryError: [Errno 21] Is a directory: 'PATH')"."""
  path = os.path.join(broken, "Images_LR", "2.tif")
  os.remove(path)
  os.mkdir(path)
  rc, err = _run_validate(broken, capsys, *flags)
  assert rc == 2 and err == (f"rsvqa-jax validate: error: {path}: a folder, not an image file; "
                             "put the image's TIFF there")


class _Records(logging.Handler):
  def __init__(self):
    super().__init__()
    self.records = []

  def emit(self, record):
    self.records.append((record.name, record.levelname, record.getMessage()))


def _claim_size(path, size):
  """Rewrites the ImageWidth and ImageLength tags of an uncompressed little-endian tile, leaving
  its strips as they are: tifffile then logs its own lines about the strip counts."""
  data = bytearray(pathlib.Path(path).read_bytes())
  ifd = struct.unpack("<I", data[4:8])[0]
  for k in range(struct.unpack("<H", data[ifd:ifd + 2])[0]):
    entry = ifd + 2 + 12 * k
    tag, kind = struct.unpack("<HH", data[entry:entry + 4])
    if tag in (256, 257):
      data[entry + 8:entry + 12] = struct.pack("<I" if kind == 4 else "<HH", *(
          (size,) if kind == 4 else (size, 0)))
  pathlib.Path(path).write_bytes(bytes(data))


@pytest.mark.parametrize("flags", [(), ("--headers-only",)])
def test_tifffiles_own_lines_on_a_refused_tile_are_not_printed(broken, capsys, flags):
  """A damaged header made tifffile print three bare lines of its own before the refusal."""
  path = os.path.join(broken, "Images_LR", "0.tif")
  _claim_size(path, 60000)
  seen = _Records()  # what reaches tifffile's handlers (a terminal: bare lines on stderr)
  logging.getLogger("tifffile").addHandler(seen)
  try:
    rc, err = _run_validate(broken, capsys, *flags)
  finally:
    logging.getLogger("tifffile").removeHandler(seen)
  assert rc == 2 and err == (f"rsvqa-jax validate: error: {path}: image is 60000x60000, expected "
                             "256x256")
  assert seen.records == []


def test_tifffiles_lines_on_a_read_tile_are_one_warning_naming_it(lr, monkeypatch):
  """What tifffile says of a tile it reads is one WARNING naming the file, not its bare lines."""
  pixels = images._pixels

  def noisy(series, source, name):
    logging.getLogger("tifffile").warning("<tifffile.TiffPage 0 @8> odd\ntag")
    return pixels(series, source, name)

  monkeypatch.setattr(images, "_pixels", noisy)
  path = os.path.join(lr, "Images_LR", "0.tif")
  seen = _Records()
  for name in ("tifffile", "rsvqa_jax.data.images"):
    logging.getLogger(name).addHandler(seen)
  try:
    assert images.read_tif(path, (256, 256)).shape == (256, 256, 3)
  finally:
    for name in ("tifffile", "rsvqa_jax.data.images"):
      logging.getLogger(name).removeHandler(seen)
  assert seen.records == [("rsvqa_jax.data.images", "WARNING", f"{path}: read, but tifffile says "
                           "of it: <tifffile.TiffPage 0 @8> odd tag")]


def test_validate_bad_json_one_line(broken, capsys):
  path = os.path.join(broken, "LR_split_val_images.json")
  with open(path, "w") as f:
    f.write('{"images": [}')
  rc, err = _run_validate(broken, capsys)
  assert rc == 2 and err.startswith(f"rsvqa-jax validate: error: {path}: malformed JSON at line 1 column 13")
  assert "\n" not in err


def test_validate_refuses_a_split_without_an_active_question(broken, capsys):
  """It printed "ok" for a set whose training split was empty; train refused it later."""
  path = os.path.join(broken, "LR_split_train_questions.json")
  data = json.loads(pathlib.Path(path).read_text())
  for q in data["questions"]:
    q["active"] = False
  pathlib.Path(path).write_text(json.dumps(data))
  rc, err = _run_validate(broken, capsys)
  warning, error = err.splitlines()  # the images still list them: counted, then refused
  assert warning.startswith("WARNING: ") and "list 40 question(s) that are inactive" in warning
  assert rc == 2 and error == (f"rsvqa-jax validate: error: {broken}: split(s) train hold no "
                               "active question: nothing trains or is evaluated on them")


def test_validate_not_a_tiff(broken, capsys):
  path = os.path.join(broken, "Images_LR", "1.tif")
  with open(path, "wb") as f:
    f.write(b"not a tiff at all")
  rc, err = _run_validate(broken, capsys)
  assert rc == 2 and f"{path}: not a readable TIFF" in err and "\n" not in err


def test_validate_a_tiff_without_an_image(broken, capsys):
  """A TIFF header whose first page offset is 0: one line of ours, none of tifffile's."""
  path = os.path.join(broken, "Images_LR", "1.tif")
  with open(path, "wb") as f:
    f.write(b"II*\x00" + bytes(4))
  rc, err = _run_validate(broken, capsys)
  assert rc == 2 and err == f"rsvqa-jax validate: error: {path}: a TIFF holding no image", err


def _truncate(path):
  """Keeps the first half of an uncompressed tile: the header still reads, the pixels do not."""
  with open(path, "rb") as f:
    data = f.read()
  with open(path, "wb") as f:
    f.write(data[:len(data) // 2])


def _corrupt_compressed(path):
  """Rewrites a tile zlib-compressed, then flips bytes in the middle of its strip."""
  tifffile.imwrite(path, images.read_tif(path), photometric="rgb", compression="zlib")
  with tifffile.TiffFile(path) as tif:
    start = tif.pages[0].dataoffsets[0] + tif.pages[0].databytecounts[0] // 2
  with open(path, "r+b") as f:
    f.seek(start)
    chunk = f.read(64)
    f.seek(start)
    f.write(bytes(b ^ 0xFF for b in chunk))


@pytest.mark.parametrize("damage", [_truncate, _corrupt_compressed])
def test_validate_decodes_every_image(broken, capsys, damage):
  path = os.path.join(broken, "Images_LR", "3.tif")
  damage(path)
  rc, err = _run_validate(broken, capsys, "--headers-only")
  assert rc == 0 and err == ""  # the header alone looks fine
  rc, err = _run_validate(broken, capsys)
  assert rc == 2 and err.startswith(f"rsvqa-jax validate: error: {path}: not a readable TIFF (")
  assert "\n" not in err


def test_validate_lists_every_bad_image(broken, capsys):
  paths = [os.path.join(broken, "Images_LR", f"{i}.tif") for i in (1, 4)]
  _truncate(paths[0])
  os.remove(paths[1])
  rc, err = _run_validate(broken, capsys)
  lines = err.splitlines()
  assert rc == 2 and len(lines) == 3
  assert lines[0].startswith(f"{paths[0]}: not a readable TIFF (")
  assert lines[1] == f"{paths[1]}: image file missing"
  assert lines[2] == ("rsvqa-jax validate: error: 2 of 6 images fail the check; the first: "
                      + lines[0])


def test_validate_headers_only_still_checks_size(broken, capsys):
  path = os.path.join(broken, "Images_LR", "2.tif")
  tifffile.imwrite(path, np.zeros((128, 256, 3), np.uint8), photometric="rgb")
  rc, err = _run_validate(broken, capsys, "--headers-only")
  assert rc == 2 and err == f"rsvqa-jax validate: error: {path}: image is 128x256, expected 256x256"
  assert _run_validate(broken, capsys, "--skip-images")[0] == 0


def test_read_tif_checks(tmp_path):
  path = str(tmp_path / "a.tif")
  rgb = np.arange(8 * 6 * 3, dtype=np.uint8).reshape(8, 6, 3)
  images.write_tif(path, rgb)
  np.testing.assert_array_equal(images.read_tif(path, size=(8, 6)), rgb)
  images.check_tif(path, size=(8, 6))
  tifffile.imwrite(path, np.moveaxis(rgb, -1, 0), photometric="rgb", planarconfig="separate")
  np.testing.assert_array_equal(images.read_tif(path, size=(8, 6)), rgb)  # planar files read as HxWx3
  images.check_tif(path, size=(8, 6))
  with pytest.raises(RSVQAError, match="image is 8x6, expected 6x8"):
    images.read_tif(path, size=(6, 8))
  tifffile.imwrite(path, np.zeros((8, 6, 3), np.uint16), photometric="rgb")
  with pytest.raises(RSVQAError, match="dtype is uint16, expected uint8"):
    images.read_tif(path)
  with pytest.raises(RSVQAError, match="dtype is uint16, expected uint8"):
    images.check_tif(path)


def test_lzw_and_jpeg_tiles_read_without_imagecodecs(tmp_path):
  """tifffile asks for its optional imagecodecs package for these compressions ("requires the
  'imagecodecs' package"): Pillow decodes them."""
  rgb = np.random.default_rng(0).integers(0, 256, (16, 8, 3), dtype=np.uint8)
  path = str(tmp_path / "lzw.tif")
  Image.fromarray(rgb).save(path, compression="tiff_lzw")
  np.testing.assert_array_equal(images.read_tif(path, size=(16, 8)), rgb)
  with open(path, "rb") as f:
    np.testing.assert_array_equal(images.decode_tif(f.read()), rgb)
  Image.fromarray(rgb).save(path, compression="jpeg")  # lossy: the shape and the dtype
  assert images.read_tif(path, size=(16, 8)).dtype == np.uint8


def test_a_tile_neither_tifffile_nor_pillow_decodes_says_what_it_needs(tmp_path, monkeypatch):
  """Three bands tagged grey, LZW-compressed: tifffile asks for imagecodecs and Pillow cannot
  identify the file, which read "not a readable TIFF (UnidentifiedImageError ...)", though
  `validate --headers-only` passed it."""
  rgb = np.random.default_rng(0).integers(0, 256, (16, 8, 3), dtype=np.uint8)
  path = str(tmp_path / "g.tif")
  tifffile.imwrite(path, np.moveaxis(rgb, -1, 0), photometric="minisblack",
                   planarconfig="separate")

  def lzw(*args, **kwargs):
    raise ValueError("<COMPRESSION.LZW: 5> requires the 'imagecodecs' package")

  monkeypatch.setattr(tifffile.TiffPageSeries, "asarray", lzw)
  with pytest.raises(RSVQAError, match=rf"^{path}: its compression needs the imagecodecs package "
                                       r"\(.*\), and Pillow cannot read it either; pip install "
                                       "imagecodecs, or save the tile as an uncompressed RGB TIFF$"):
    images.read_tif(path, size=(16, 8))


def test_tiles_in_another_colour_space_are_refused_and_grey_bands_and_jpeg_read(tmp_path):
  """A YCbCr or L*a*b* tile holds three uint8 bands like an RGB one: tifffile returned the raw
  values, which validate passed and the model read as RGB. Bands tagged grey (a GeoTIFF's) are
  read as stored, and a JPEG-compressed YCbCr tile is decoded to RGB."""
  rgb = np.random.default_rng(0).integers(0, 256, (16, 8, 3), dtype=np.uint8)
  path = str(tmp_path / "a.tif")
  for mode, label in (("YCbCr", "YCBCR"), ("LAB", "CIELAB")):
    Image.fromarray(rgb).convert(mode).save(path)
    for read in (images.read_tif, images.check_tif):
      with pytest.raises(RSVQAError, match=f"^{path}: image colour space is {label}, expected "
                                           "RGB; save the tile as RGB$"):
        read(path)
  tifffile.imwrite(path, np.moveaxis(rgb, -1, 0), photometric="minisblack",
                   planarconfig="separate")
  np.testing.assert_array_equal(images.read_tif(path, size=(16, 8)), rgb)
  smooth = np.broadcast_to(np.linspace(0, 255, 8, dtype=np.uint8)[None, :, None], (16, 8, 3))
  Image.fromarray(np.ascontiguousarray(smooth)).convert("YCbCr").save(path, compression="jpeg")
  with tifffile.TiffFile(path) as tif:
    assert tif.pages[0].photometric == tifffile.PHOTOMETRIC.YCBCR
  assert np.abs(images.read_tif(path).astype(int) - smooth).mean() < 8  # RGB again, JPEG's loss


def test_validate_names_a_missing_image_folder_once_and_caps_the_listed_problems(broken, capsys):
  folder = os.path.join(broken, "Images_LR")
  paths = sorted(os.path.join(folder, f) for f in os.listdir(folder))
  for path in paths[:3]:
    os.remove(path)
  from rsvqa_jax.commands import validate as validate_cmd  # pylint: disable=g-import-not-at-top
  validate_cmd.SHOWN_PROBLEMS, shown = 2, validate_cmd.SHOWN_PROBLEMS
  try:
    rc, err = _run_validate(broken, capsys)
  finally:
    validate_cmd.SHOWN_PROBLEMS = shown
  lines = err.splitlines()
  assert rc == 2 and len(lines) == 4 and lines[2] == "... and 1 more", lines
  assert lines[3].startswith("rsvqa-jax validate: error: 3 of 6 images fail the check")
  shutil.rmtree(folder)
  rc, err = _run_validate(broken, capsys)
  assert rc == 2 and err == (f"rsvqa-jax validate: error: {folder}: image folder missing (the LR "
                             "layout keeps its images there); --skip-images checks the JSON "
                             "files alone")
  assert _run_validate(broken, capsys, "--skip-images")[0] == 0
  with open(folder, "w") as f:
    f.write("not a folder")
  assert _run_validate(broken, capsys)[1].startswith(
      f"rsvqa-jax validate: error: {folder}: a file, not the image folder (the LR layout")


def test_a_file_where_a_folder_or_a_config_is_expected_is_named_as_such(lr, tmp_path, capsys):
  a_file = tmp_path / "notes.txt"
  a_file.write_text("x")
  for argv, message in [
      (["validate", "--data", str(a_file)], f"{a_file}: dataset folder is a file, not a folder"),
      (["validate", "--data", str(tmp_path / "none")], "none: dataset folder does not exist"),
      (["config", "--config", str(tmp_path)], f"{tmp_path}: is a folder; give a config file")]:
    assert cli.main(argv) == 2
    assert message in capsys.readouterr().err


def test_images_the_train_split_also_asks_about_are_counted(broken, capsys):
  """A val image that train also asks about (a split by question, not by image) was not said:
  a model trained on train has seen it, so its val questions are not held out by image."""
  def path(kind, split):
    return os.path.join(broken, f"LR_split_{split}_{kind}.json")
  with open(path("images", "val")) as f:
    val_image = next(i["id"] for i in json.load(f)["images"] if i.get("active", True))
  with open(path("images", "train")) as f:
    train_images = json.load(f)
  moved = next(i for i in train_images["images"] if i.get("active", True))
  target = next(i for i in train_images["images"] if i["id"] == val_image)  # listed, inactive
  # train's first image's questions are asked of the val image instead
  asked = moved["questions_ids"]
  target.update(active=True, questions_ids=asked)
  moved.update(active=False, questions_ids=[])
  with open(path("images", "train"), "w") as f:
    json.dump(train_images, f)
  with open(path("questions", "train")) as f:
    questions = json.load(f)
  for q in questions["questions"]:
    if q["id"] in asked:
      q["img_id"] = val_image
  with open(path("questions", "train"), "w") as f:
    json.dump(questions, f)
  assert cli.main(["validate", "--data", broken, "--skip-images"]) == 0
  out = capsys.readouterr().out.splitlines()
  assert next(l for l in out if l.startswith("images in train ")).split()[3:] == ["-", "1", "0"]
  assert ("images in train: 1 of val; their questions are not held out by image (a model trained "
          "on train has seen these images)") in out


def test_validate_names_the_subfolder_holding_the_dataset(lr, tmp_path, capsys):
  inner = str(tmp_path / "RSVQA_LR")
  shutil.copytree(lr, inner)
  capsys.readouterr()
  assert cli.main(["validate", "--data", str(tmp_path)]) == 2
  assert capsys.readouterr().err.strip() == (
      f"rsvqa-jax validate: error: {tmp_path}: the dataset files are in {inner}: give --data "
      f"{inner} (in a training config, data.root={inner})")


def test_a_missing_train_question_file_is_named_beside_the_others(broken, capsys):
  """Without --dataset the folder read "cannot tell the dataset variant: it holds none of
  LR_split_train_questions.json, USGS_..., RSVQAxBEN_...", as if it held no dataset at all."""
  os.remove(os.path.join(broken, "LR_split_train_questions.json"))
  assert cli.main(["validate", "--data", broken]) == 2
  assert capsys.readouterr().err.strip() == (
      f"rsvqa-jax validate: error: {broken}: LR_split_train_questions.json is missing, beside "
      "other lr split files (such as LR_split_val_questions.json): restore it (the lr layout is "
      "told from it)")


def _misplace_images(folder, how):
  """Rearranges the image folder of a dataset as copies and archives misplace it."""
  if how == "nested":
    os.rename(folder, folder + ".tmp")
    os.mkdir(folder)
    os.rename(folder + ".tmp", os.path.join(folder, "Images_LR"))
  elif how == "upper-case files":
    for name in os.listdir(folder):
      os.rename(os.path.join(folder, name), os.path.join(folder, name.replace(".tif", ".TIF")))
  elif how in ("tiff files", "png files"):  # .tiff as many tools save them; PNGs as converted
    for name in os.listdir(folder):
      path = os.path.join(folder, name)
      if how == "png files":
        Image.open(path).save(path.replace(".tif", ".png"))
        os.remove(path)
      else:
        os.rename(path, path.replace(".tif", ".tiff"))
  elif how == "zero-padded files":
    for name in os.listdir(folder):
      os.rename(os.path.join(folder, name), os.path.join(folder, name.zfill(7)))  # 000.tif
  elif how == "lower-case folder":
    os.rename(folder, os.path.join(os.path.dirname(folder), "images_lr"))
  else:
    shutil.rmtree(folder)
    with open(os.path.join(os.path.dirname(folder), "images_LR.Zip"), "w") as f:
      f.write("an archive")


@pytest.mark.parametrize("how, message", [
    ("nested", "{folder}: the images are in {folder}/Images_LR: move them up one folder"),
    ("upper-case files", "{folder}/0.tif: image file missing; {folder} holds 0.TIF (another letter "
                         "case): rename the image files to <id>.tif"),
    ("tiff files", "{folder}/0.tif: image file missing; {folder} holds 0.tiff (another "
                   "extension): rename the image files to <id>.tif"),
    ("png files", "{folder}/0.tif: image file missing; {folder} holds 0.png (another extension): "
                  "convert the images to TIFF files named <id>.tif"),
    ("zero-padded files", "{folder}/0.tif: image file missing; {folder} holds 000.tif (the id "
                          "padded with zeros): rename the image files to <id>.tif, the id as the "
                          "JSON files write it"),
    ("lower-case folder", "{folder}: image folder missing; {root}/images_lr differs in letter case "
                          "only: rename it to Images_LR"),
    ("zipped", "{folder}: image folder missing; {root}/images_LR.Zip lies beside it: unzip it "
               "there")])
def test_validate_says_once_where_misplaced_images_are(broken, capsys, how, message):
  """Each image was said missing, one line per image, with no word of where they were (images
  saved as .tiff or .png, too)."""
  folder = os.path.join(broken, "Images_LR")
  _misplace_images(folder, how)
  rc, err = _run_validate(broken, capsys)
  assert rc == 2 and err == ("rsvqa-jax validate: error: "
                             + message.format(folder=folder, root=broken))


def test_training_says_where_misplaced_images_are(broken):
  """The feature cache (train, study, features) asks each image: it said "image file missing"."""
  folder = os.path.join(broken, "Images_LR")
  _misplace_images(folder, "nested")
  dataset = rsvqa_json.read_dataset(broken, "lr")
  with pytest.raises(RSVQAError, match=f"^{re.escape(folder)}: the images are in "
                                       f"{re.escape(os.path.join(folder, 'Images_LR'))}: move "
                                       "them up one folder$"):
    dataset.check_image_exists(dataset["train"].image_id[0])


def test_a_subfolder_without_the_images_is_not_named(broken):
  os.mkdir(os.path.join(broken, "Images_LR", "extra"))
  os.remove(os.path.join(broken, "Images_LR", "0.tif"))
  assert images.misplaced(os.path.join(broken, "Images_LR", "0.tif")) is None
  assert images.misplaced(os.path.join(broken, "Images_LR", "1.tif")) is None  # present


@pytest.mark.parametrize("write, message", [
    (lambda p: tifffile.imwrite(p, np.zeros((8, 8, 3), np.uint16), photometric="rgb"),
     "image dtype is uint16, expected uint8; convert it to 8-bit RGB (e.g. gdal_translate -ot Byte "
     "-scale IN.tif OUT.tif)"),
    (lambda p: tifffile.imwrite(p, np.zeros((8, 8, 3), np.float32), photometric="rgb"),
     "image dtype is float32, expected uint8; convert it to 8-bit RGB (e.g. gdal_translate -ot "
     "Byte -scale IN.tif OUT.tif)"),
    (lambda p: Image.fromarray(np.zeros((8, 8, 4), np.uint8)).save(p),
     "image has 4 bands, expected 3 (RGB and an alpha band); save it without the alpha band"),
    (lambda p: tifffile.imwrite(p, np.zeros((8, 8, 4), np.uint8), photometric="rgb",
                                extrasamples=["unspecified"]),
     "image has 4 bands, expected 3 (RGB and an extra band); save it without the extra band"),
    (lambda p: tifffile.imwrite(p, np.zeros((8, 8, 5), np.uint8), photometric="rgb",
                                extrasamples=["assocalpha", "unspecified"]),
     "image has 5 bands, expected 3 (RGB and 2 extra bands); save it without the extra bands"),
    (lambda p: tifffile.imwrite(p, np.zeros((8, 8, 4), np.uint8), photometric="minisblack"),
     "image has 4 bands, expected 3"),
    (lambda p: Image.fromarray(np.zeros((8, 8, 3), np.uint8)).convert("P").save(p),
     "image is a palette (colour-mapped) image, expected 3 bands; save it as RGB"),
    (lambda p: tifffile.imwrite(p, np.zeros((8, 8), np.uint8)),
     "image has 1 band, expected 3 (a greyscale image); save it as RGB"),
    (lambda p: Image.new("CMYK", (8, 8)).save(p, format="TIFF"),
     "image has 4 bands, expected 3 (a CMYK image); save it as RGB"),
    # A Sentinel-2 stack, one page per band, and a planar one: once "256 bands" (as 13x256 pixels)
    (lambda p: tifffile.imwrite(p, np.zeros((13, 8, 256), np.uint8)),
     "image has 13 bands, expected 3 (a multispectral image?); save its red, green and blue "
     "bands as an 8-bit RGB TIFF"),
    (lambda p: tifffile.imwrite(p, np.zeros((12, 8, 256), np.uint8), planarconfig="separate"),
     "image has 12 bands, expected 3 (a multispectral image?); save its red, green and blue "
     "bands as an 8-bit RGB TIFF")])
def test_refused_tiles_say_how_to_convert_them(tmp_path, write, message):
  """A palette tile was said to have 1 band, and a 16-bit or RGBA one was refused with no fix;
  a multispectral stack read its bands from its width."""
  path = str(tmp_path / "a.tif")
  write(path)
  for read in (images.read_tif, images.check_tif):
    with pytest.raises(RSVQAError, match=f"^{re.escape(f'{path}: {message}')}$"):
      read(path)
