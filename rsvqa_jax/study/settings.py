"""The settings a study's models were trained with, beside the paper's, for the report."""
from rsvqa_jax import config as config_lib
from rsvqa_jax.bias import tables
from rsvqa_jax.features import pretrain
from rsvqa_jax.study import names, reuse
from rsvqa_jax.train import inputs

# The paper's settings (Section 3.1, 6.1-6.2; dropout and the text lr from the original code and
# Figure 8), printed beside the ones a report's models were trained with.
PAPER_SETTINGS = {
    "dataset": "RSVQA LR: 772 images, 77,232 questions (train 57,223 / val 10,005 / test 10,004)",
    "image encoder": "ResNet-152, ImageNet weights, frozen, 2,048-d pooled features",
    "skipthoughts": "Skip-thoughts uni-skip GRU (pretrained, 2,400-d); fine-tuning lr 1e-4",
    "distilbert": "distilBERT (pretrained, 768-d); fine-tuning lr 1e-6 (BERT family)",
    "fusion": "e-mult (Figure 5, Table 6); MUTAN / e-mult in Table 2; projections 1,200-d",
    "classifier": "FC 256, then the answers",
    "dropout": "0.5 (the original code's)",
    "optimiser": "Adam, lr 1e-5 (fusion and classifier)",
    "batch / epochs": "70 / 50",
    "seeds": "3 runs, mean (std)",
    "adversarial": "a random image of the entire dataset (whited / blacked out: similar, omitted)",
    "baseline": "the original RSVQA model (Lobry et al.), frozen Skip-thoughts, e-mult",
}


def rows(config, cache, root):
  """[(setting, what this study's models were trained with, the paper's)] for the report."""
  s, c = config.study, config
  out = []
  if s.synthetic:
    data = (f"synthetic {s.variant.upper()}: {s.images} images x {s.questions_per_image} "
            f"questions, seed {s.data_seed}, prior strength {s.prior_strength}"
            + (f"; balanced twin {s.balanced.images} x {s.balanced.questions_per_image}"
               if s.balanced.enabled else ""))
  else:
    data = f"{tables.dataset_label(c.data.name)} at {c.data.root}"
  out.append(("dataset", data))
  image = c.image
  if image.arch == "synthetic_resnet":
    p, made = image.pretrain, image_encoder(config, cache, root)
    epochs = f"{p.epochs} epoch{'' if p.epochs == 1 else 's'}"
    encoder = (f"synthetic ResNet-{p.depth} (width {p.width}, {8 * p.width}-d) at {p.image_size} "
               f"px, pretrained {epochs} (batch {p.batch_size}, lr {p.learning_rate:g}) "
               "on the train images' land cover, frozen")
    if made.get("val_presence_accuracy") is not None:
      encoder += (f"; land-cover presence on val {100 * made['val_presence_accuracy']:.1f}% "
                  f"(majority {100 * made['val_majority_accuracy']:.1f}%)")
  else:
    encoder = f"{image.arch} from {image.checkpoint or 'random init'}, frozen"
  out.append(("image encoder", encoder))
  for lm in dict.fromkeys(list(s.language_models) + [names.row_lm(s, r) for r in s.table2_rows]):
    e = s.lm[lm]
    sizes = ", ".join(f"{k} {e[k]}" for k in ("word_dim", "dim", "layers", "heads", "hidden_dim",
                                              "update_bias")
                      if k in e)
    weights = e.checkpoint or f"random init ({sizes})"
    out.append((lm, f"{e.label}: {e.encoder}, {weights}; fine-tuning lr {e.text_lr:g}"))
  m = c.model
  fusions = sorted({s.fusion} | {names.parse_row(r)[2] or "mult" for r in s.table2_rows})
  mutan = f"; MUTAN rank {m.mutan_rank} x {m.mutan_dim}" if "mutan" in fusions else ""
  out.append(("fusion", f"{', '.join(names.FUSION_LABELS[f] for f in fusions)}; projections "
                        f"{m.hidden_dim} (tanh){mutan}"))
  out.append(("classifier", f"FC {m.classifier_dim}, then the answers"))
  out.append(("dropout", f"{m.dropout:g}"))
  out.append(("optimiser", f"{c.optim.name}, lr {c.optim.lr:g}"))
  epochs = f"{c.train.num_epochs}" + (f" (frozen language models: {s.frozen_epochs})"
                                      if s.frozen_epochs else "")
  out.append(("batch / epochs", f"{c.train.batch_size} / {epochs}"))
  out.append(("seeds", ", ".join(map(str, s.seeds))))
  alike = [kind for kind in s.adversarial if reuse.draws(s, kind) != s.repeats]
  alike = f"{', '.join(alike)}: 1, every draw alike; " if alike else ""
  out.append(("adversarial", f"{', '.join(s.adversarial)}: K = {s.repeats} draws per question "
                             f"({alike}pool: {s.adv_pool}, seed {s.adv_seed})"))
  if names.BASELINE in s.table2_rows:
    out.append(("baseline", f"{s.baseline.label}: {s.baseline.language_model}, frozen, e-mult, "
                            f"with {', '.join(s.baseline.overrides) or 'no other setting'}"))

  def paper(key):
    if key in s.lm:  # a language model: the paper's of its family
      key = "skipthoughts" if s.lm[key].encoder == "skipthoughts" else "distilbert"
    return PAPER_SETTINGS.get(key, "")
  return [(key, value, paper(key)) for key, value in out]


def image_encoder(config, cache, root):
  """What the image encoder of the study's dataset (folder `root`) is; a synthetic ResNet's
  pretraining manifest, once made."""
  image = config_lib.image_config(config.image, cache, inputs.folder_source(root))
  if image.arch == "synthetic_resnet":
    manifest = pretrain.read_manifest(image.pretrained_dir)
    out = {"arch": "synthetic_resnet"}
    if manifest:
      val = manifest["metrics"].get("val", {})
      out.update(depth=manifest["depth"], width=manifest["width"],
                 image_size=manifest["image_size"],
                 train_images=manifest["dataset"]["train_images"],
                 val_presence_accuracy=val.get("presence_accuracy"),
                 val_majority_accuracy=val.get("majority_accuracy"))
    return out
  return {"arch": image.arch, "checkpoint": image.checkpoint or "random init"}
