"""Every config section's defaults: one source for what a run, a study and an answerability run
read. A config file starts from these (`base_config()`, `study_defaults()`, ...)."""
import ml_collections

# text.checkpoint / image.checkpoint value asking for randomly initialised weights.
RANDOM = "random"
# The keys that name a file or folder: a workdir records them absolute (train/checkpointing),
# and a ~ in their command-line value is the home folder (overrides.override).
PATH_KEYS = ("data.root", "data.cache_dir", "text.checkpoint", "image.checkpoint",
             "image.pretrained_dir", "answerability.pools")
LANGUAGE_MODELS = ("skipthoughts", "distilbert", "bert", "roberta")
FUSIONS = ("mult", "concat", "mutan")
# The ResNet depths models/resnet.ARCHS builds (a test keeps the two alike), and image.arch's
# values: a torchvision ResNet of one of them, or the small one pretrained on synthetic scenes.
RESNET_DEPTHS = (18, 34, 50, 101, 152)
IMAGE_ARCHS = ("synthetic_resnet", *(f"resnet{d}" for d in RESNET_DEPTHS))
# data.augment_variants' values: the feature-cache variants of features/pixels.VARIANTS ("none":
# the clean table; a test keeps them alike), and the answerability head's losses.
AUGMENT_VARIANTS = ("none", "hflip", "vflip", "rot90", "rot180", "rot270")
ANSWERABILITY_LOSSES = ("bce", "listnet")
# The validation metrics that may pick an answerability run's best checkpoint: the ranking ones
# at bias/answerability.KS and the ternary ones (a test keeps them alike with its keys).
SELECT_METRICS = ("ndcg@1", "ndcg@3", "ndcg@5", "map@1", "map@3", "map@5", "ternary_acc",
                  "ternary_f1")
# Folders under a run's cache directory (data.cache_dir, default beside the workdir).
FEATURES_DIR, QUESTIONS_DIR, PRETRAINED_DIR = "features", "questions", "synthetic_resnet"
LM_DIR = "lm"  # a study's random-init language models: CACHE/lm/{lm}_random_{key}


def _typed_none(field_type):
  return ml_collections.FieldReference(None, field_type=field_type)


def data_section():
  """Which dataset a run reads (a folder, or the synthetic generator's), its splits and caches."""
  c = ml_collections.ConfigDict()
  # The dataset layout, lr | hr | xben: the ones a model trains on (`analyze --dataset` also
  # reads floodnet and rsivqa).
  c.name = "lr"
  # The dataset folder, in data.name's layout; unset for synthetic data (given beside
  # data.synthetic or study.synthetic it is refused: it would never be read).
  c.root = _typed_none(str)
  c.synthetic = False  # generate (or reuse) a synthetic dataset instead of reading root
  c.synthetic_variant = "lr"  # data.synthetic only: the layout generated, lr | hr | xben
  # data.synthetic only: images generated, at least one per split (3; hr: 4), so a synthetic
  # run must set it.
  c.synthetic_images = 0
  c.synthetic_seed = 0  # data.synthetic only: the generator's seed (same seed, same bytes)
  c.synthetic_questions_per_image = 100  # data.synthetic only: questions per image, 1 to 1000
  c.cache_dir = _typed_none(str)  # default: rsvqa_cache beside the workdir
  c.train_split = "train"  # the split trained on; its answers are the model's answer vocabulary
  c.val_split = "val"  # validated at each epoch end: its best OA picks the best checkpoint
  # Training-time image augmentation (off when empty): feature-cache variants such as
  # ("hflip", "vflip", "rot90", "rot180", "rot270"); each training sample whose question has no
  # positional word reads the features of one of them, drawn per sample and step.
  c.augment_variants = ()
  return c


def pretrain_section():
  """The synthetic ResNet's pretraining (features/pretrain.py): small and fast.

  595 train images at 64x64 x 8 epochs took 110 s on two shared CPU cores.
  """
  c = ml_collections.ConfigDict()
  c.depth = 18  # the ResNet's depth: 18 | 34 | 50 | 101 | 152
  c.width = 16  # stem width; pooled features are 8 x width = 128-d (x4 at depths 50 and more)
  # Pixels per side the train images are resized to (and the features' size when
  # image.image_size is 0), at most 4096.
  c.image_size = 64
  c.epochs = 8  # passes over the train split's images
  c.batch_size = 32  # images per step (at most the train split's; the rest of an epoch dropped)
  c.learning_rate = 3e-3  # AdamW's learning rate
  c.weight_decay = 1e-4  # AdamW's decoupled weight decay
  c.fraction_weight = 1.0  # weight of the per-class pixel-fraction loss
  c.seed = 0  # seed of the initial weights, the batch order and the random flips and turns
  return c


def image_section():
  """The frozen image encoder and how its features are computed (features/encoder.py).

  arch: "resnet18" ... "resnet152" (checkpoint = a weights file or Hugging Face folder;
    "random" or empty = random init from `seed` at stem `width`, which real-data runs must ask
    for explicitly, see check_weights) or "synthetic_resnet" (the small ResNet pretrained on the
    synthetic scenes' land cover with `pretrain`, stored in `pretrained_dir`, default
    CACHE/synthetic_resnet/KEY, KEY hashed from the pretrain settings and the dataset pretrained
    on: each dataset's own train split).
  image_size: side the tiles are resized to before the encoder (0 = native size; for
    synthetic_resnet 0 means the size it was pretrained at).
  map: also keep the final spatial map in the cache (the spatial branch of the grounding work).
  """
  c = ml_collections.ConfigDict()
  # resnet18 | resnet34 | resnet50 | resnet101 | resnet152 (weights: checkpoint), or
  # synthetic_resnet: the small ResNet pretrained here on the synthetic scenes (pretrain).
  c.arch = "resnet152"
  # A ResNet's weights: a torchvision file or Hugging Face folder; "random" or empty: random
  # init from seed at stem width (real data must say "random"). synthetic_resnet reads none.
  c.checkpoint = ""
  # synthetic_resnet only: its folder; empty: CACHE/synthetic_resnet/KEY, KEY hashed from the
  # pretrain settings and the dataset pretrained on (its train split).
  c.pretrained_dir = ""
  c.batch_size = 32  # images per encoder pass while features are computed, at most 1024
  # Also cache the final spatial map (model.head original and attention read it, and the
  # grounding work's spatial branch).
  c.map = False
  # Pixels per side the tiles are resized to before the encoder, 0 to 4096 (0: native size;
  # synthetic_resnet: the size it was pretrained at).
  c.image_size = 0
  # Random-init ResNet only: stem width, at most 256 (64: torchvision's); its features are
  # 8 x width wide (x4 at depths 50 and more).
  c.width = 64
  c.seed = 0  # random-init ResNet only: the seed its weights are drawn from
  c.pretrain = pretrain_section()
  return c


def text_section():
  """The question encoder (models/skipthoughts.py, models/bert.py), frozen or fine-tuned."""
  c = ml_collections.ConfigDict()
  c.encoder = "skipthoughts"  # skipthoughts | distilbert | bert | roberta
  # Skip-thoughts folder or Hugging Face folder; "random": random init (must be explicit on
  # real data; None means random init only for synthetic data, see check_weights). Random init
  # is Skip-thoughts only: the BERTs need a folder.
  c.checkpoint = _typed_none(str)
  # Keep the language model's weights fixed: no gradient, no optimizer state, optim.text_lr
  # unused.
  c.frozen = False
  # Frozen and deterministic (no text dropout): encode each distinct question once and train on
  # the cached vectors (features/question_cache.py) instead of running the encoder every step.
  c.cache_questions = True
  # Tokens kept per question (a longer one is cut, with a WARNING; a BERT reads at most its own
  # limit): the paper's question embedding length.
  c.max_length = 50
  c.bayesian = False  # Skip-thoughts variational dropout
  # Skip-thoughts only: dropout rate on the word vectors, in [0, 1); with bayesian, the
  # variational rate (0: the paper's 0.25).
  c.dropout = 0.0
  c.word_dim = 620  # Skip-thoughts random init only (no checkpoint): word vector width
  c.hidden_dim = 2400  # Skip-thoughts random init only: GRU state (question vector) width
  # Drop "?" from Skip-thoughts questions, as the original RSVQA code's tokenizer does.
  c.strip_question_mark = False
  return c


def model_section():
  """The fusion + classifier (models/vqa.py), the paper's settings."""
  c = ml_collections.ConfigDict()
  c.fusion = "mult"  # mult | concat | mutan
  c.hidden_dim = 1200  # width both vectors are projected to (linear, tanh) before the fusion
  c.classifier_dim = 256  # the classifier's hidden layer width
  c.dropout = 0.5  # rate after each projection and in the classifier, in [0, 1)
  c.mutan_rank = 5  # mutan fusion only: the Tucker decomposition's rank, at most 64
  c.mutan_dim = 1200  # mutan fusion only: width of each rank's factor projections
  # mutan fusion only: signed square root and L2 normalisation of the summed factors before the
  # output layer.
  c.mutan_normalize = False
  c.blind = False  # visual blind: question vector straight into the classifier
  # "paper": pooled image vector, the fusion above; "original": the original RSVQA code's
  # e-mult head, a trainable 1x1 conv over the image map (needs image.map; models/vqa.py).
  # "attention": question-guided softmax attention over the map's positions, then the fusion
  # above (needs image.map; models/attention.py), of width attention_dim.
  c.head = "paper"
  c.attention_dim = 512  # attention head only: width the map positions and question meet at
  return c


def optim_section():
  """The optimizer (train/optimizers.py): one learning rate for the head, one for the text
  encoder."""
  c = ml_collections.ConfigDict()
  c.name = "adam"  # adam | sgd
  c.lr = 1e-5  # fusion + classifier
  c.text_lr = 1e-4  # fine-tuned language model (paper: 1e-4 Skip-thoughts, 1e-6 BERTs)
  c.b1 = 0.9  # adam only: first-moment decay, in [0, 1)
  c.b2 = 0.999  # adam only: second-moment decay, in [0, 1)
  c.eps = 1e-8  # adam only: added to the update's denominator
  return c


def train_section():
  """The training loop (train/loop.py): batches, epochs, checkpoints, compute dtype."""
  c = ml_collections.ConfigDict()
  # Questions per training step, global over all devices and hosts (topped up with masked rows
  # when the devices do not divide it: sharding.batch_layout).
  c.batch_size = 70
  c.eval_batch_size = 280  # questions per evaluation batch; seeds of one model may differ in it
  c.num_epochs = 50  # passes over the train split, each ending with a validation
  c.compute_dtype = "float32"  # float32 | bfloat16 (parameters stay float32)
  c.checkpoint_every_steps = 1000  # steps between checkpoints; one is written at each epoch end
  c.keep_checkpoints = 2  # the newest periodic checkpoints kept (workdir/best keeps its one)
  # Steps between the training metrics lines of metrics.jsonl, where the divergence stop is
  # also checked.
  c.log_every_steps = 50
  # Token widths a batch of questions is padded to: the smallest that holds its longest question
  # (past the largest, a multiple of it), so few shapes are compiled.
  c.length_buckets = (8, 16, 24, 32, 48, 64)
  # >0: stop (as if killed: steps past the last checkpoint are done again on resume) after this
  # many steps in this call.
  c.stop_after_steps = 0
  # A progress bar on a terminal, INFO lines elsewhere; false: neither (a study's runs are
  # false).
  c.progress_bar = True
  # Divergence stop (train/loop.py Divergence): the loss above divergence_factor x its early
  # level for divergence_steps steps in a row, or a non-finite loss or gradient (0 = factor off).
  c.divergence_factor = 10.0
  c.divergence_steps = 20  # steps in a row above the factor that stop a run
  return c


def base_config():
  """Every key a training run reads, at its default (the paper's settings where it gives them)."""
  c = ml_collections.ConfigDict()
  # Seed of the initial weights (dropout: seed + 1), the batch order and the augmentation draws.
  c.seed = 0
  c.data = data_section()
  c.image = image_section()
  c.text = text_section()
  c.model = model_section()
  c.optim = optim_section()
  c.train = train_section()
  return c


def study_defaults():
  """The `study` section every study config carries (rsvqa_jax/study/ reads it)."""
  s = ml_collections.ConfigDict()
  s.synthetic = True  # generate the dataset; False: read config.data.root (config.data.name)
  s.variant = "lr"  # synthetic studies only: the layout generated, lr | hr
  s.images = 300  # synthetic studies only: images of the main dataset, 3 or more
  s.questions_per_image = 40  # synthetic studies only: questions per image, 1 to 1000
  s.data_seed = 0  # synthetic studies only: generator seed of every dataset the study draws
  # Synthetic studies only: the generated questions' language prior (1: real RSVQA's priors,
  # 0: uniform per type, above 1: stronger; a balanced set ignores it).
  s.prior_strength = 1.0
  s.balanced_data = False  # the main dataset itself balanced
  s.language_models = ("skipthoughts", "distilbert")  # keys of `lm`, in report order
  # One entry per language model, named by the config (lm_entry: the study.lm.NAME fields).
  s.lm = ml_collections.ConfigDict()
  s.lm_weights = ("frozen", "finetuned")  # the grid's weights of each model: frozen, finetuned
  s.seeds = (0, 1, 2)  # training seeds of every grid run (its `seed`): mean (std) over them
  s.fusion = "mult"  # Figure 5: e-mult everywhere
  s.split = "test"  # the split models are tested and attacked on (never data.train_split)
  s.adversarial = ("random",)  # any of random, shuffle, white, black, noise
  # Image substitutions per question and kind, 1 to 1000 (random and shuffle; white, black and
  # noise are drawn once).
  s.repeats = 10
  s.adv_seed = 0  # seed of the substitutions and of the noise images
  s.adv_pool = "dataset"  # random images from every split ("split": the evaluated one)
  # The balanced twin (study/balanced_twin.py): where the most common answer is the uniform
  # guess, the blind model should fall to it.
  s.balanced = ml_collections.ConfigDict()
  s.balanced.enabled = True  # synthetic only: a reference / blind pair on a balanced twin
  s.balanced.images = 200  # the twin's images, 3 or more
  s.balanced.questions_per_image = 30  # the twin's questions per image, 1 to 1000
  s.balanced.language_model = "skipthoughts"  # its pair's language model: a key of `lm`
  s.balanced.lm_weights = "finetuned"  # its pair's weights: frozen | finetuned
  s.balanced.seeds = (0,)  # its pair's training seeds (one or more)
  s.compilation_cache = True  # XLA cache under DIR/cache/xla: seeds reuse compiled steps
  s.frozen_epochs = 0  # >0: epochs of the frozen-LM runs (cached question vectors: cheap); 0: train's
  # Table 2's rows besides the grid's reference models: "LM,frozen|finetuned,FUSION" or "baseline"
  # (study.baseline); empty: the grid's reference models (Figure 5's e-mult ones).
  s.table2_rows = ()
  # Table 2's "baseline" row, where study.table2_rows names it: one frozen e-mult model.
  s.baseline = ml_collections.ConfigDict()
  s.baseline.language_model = "skipthoughts"  # a key of `lm`, frozen, e-mult
  # Its name in the report (configs/study_paper.py's overrides give it the original code's head).
  s.baseline.label = "RSVQA baseline"
  s.baseline.overrides = ()  # "key=value" settings of its runs (configs/rsvqa_baseline.py's)
  s.require_real = False  # refuse to run without real data and pretrained weights (study_paper)
  s.min_questions = 40  # report: cells with fewer questions of study.split are flagged
  s.reading = ml_collections.ConfigDict()  # thresholds of the report's reading, in points
  s.reading.close = 2.0  # a blind model within this of its reference: a strong bias
  s.reading.margin = 5.0  # a reference model this far above the prior "clearly beats" it
  s.reading.guess = 3.0  # a balanced-twin blind model within this of the prior: "a guess"
  # The shortcuts stage (docs/audits/shortcuts.md; synthetic studies only, a real-data one skips
  # it): a set with a planted shortcut, its shortcut OOD benchmark, a reference / blind pair
  # (study/shortcuts.py).
  s.shortcuts = ml_collections.ConfigDict()
  s.shortcuts.enabled = False  # run the stage
  s.shortcuts.plant = ("kw:parking=yes@0.9+1",)  # data/questions.PLANT_SYNTAX; () = none
  s.shortcuts.balanced = True  # balanced besides the plant: the plant is its one language shortcut
  # The planted set's images, 4 or more (hr: 5): the re-split draws its 3 splits from the
  # set's train and val images.
  s.shortcuts.images = 400
  s.shortcuts.questions_per_image = 12  # the planted set's questions per image, 1 to 1000
  s.shortcuts.seed = 0  # of the 70 / 5 / 25 re-split (by image)
  s.shortcuts.language_model = "skipthoughts"  # a key of `lm`
  s.shortcuts.lm_weights = "finetuned"  # its pair's weights: frozen | finetuned
  s.shortcuts.seeds = (0,)  # its pair's training seeds
  s.shortcuts.ood_selection = False  # also the paper's Table 4 comparison (adaptive overfitting)
  s.shortcuts.min_questions = 20  # the reading ranks the gaps of OOD sets at least this large
  # The grounding stage (docs/audits/grounding.md; synthetic studies only): every grid run's
  # relevance maps scored against the dataset's groundings (eval/grounding.study_stage), beside
  # the floors.
  s.grounding = ml_collections.ConfigDict()
  s.grounding.enabled = False  # run the stage
  s.grounding.method = "auto"  # eval/grounding.METHODS; auto: attention if any, else Grad-CAM
  return s


def answerability_section():
  """The `answerability` section (ChiQA ranking, DESIGN.md 6.3): pools, head loss, study stage.

  Read by data/, train/ and eval/answerability.py; configs/answerability_*.py add it.
  """
  c = ml_collections.ConfigDict()
  # Folder of Answerability_{split}.csv; unset: the dataset folder if it holds them, else (a
  # synthetic dataset) CACHE/answerability/pools_KEY, generated by `answerability train`.
  c.pools = _typed_none(str)
  c.pool_size = 5  # candidate images per question (a split too small: the most it fills, >= 2)
  c.pools_per_image = 2.0  # questions per image of a split
  c.balance = 1.0  # 0: candidates as the scenes fall; 1: labels uniform whatever the question
  c.pool_seed = 0  # seed of the pools drawn here (pools read from a folder keep theirs)
  c.loss = "bce"  # bce: pointwise, targets 1 / 0.5 / 0 | listnet: softmax over a pool
  c.batch_pools = 16  # pools per training batch (x pool_size pairs)
  c.select_metric = "ndcg@3"  # validation metric that picks the best checkpoint
  c.study = ml_collections.ConfigDict()  # the study stage (eval/answerability.py)
  # Run the stage within `rsvqa-jax study` (`rsvqa-jax answerability study` runs it regardless).
  c.study.enabled = False
  c.study.language_models = ("skipthoughts", "distilbert")  # keys of study.lm
  c.study.weights = "finetuned"  # every model's weights: frozen | finetuned
  c.study.seeds = (0,)  # training seeds of each model
  c.study.num_epochs = 0  # 0: train.num_epochs
  c.study.no_info = True  # also pools at balance 1, where the wording carries no label information
  c.study.word_min_count = 20  # word table: words in fewer train pairs are left out
  c.study.top_words = 10  # word table: its rows, the words whose pairs' labels stray most
  return c


def lm_entry(encoder, label, text_lr, checkpoint="", **sizes):
  """One language model of a study: encoder name, report label, fine-tuning lr, weights.

  An empty checkpoint means random init: Skip-thoughts at `word_dim` / `hidden_dim`, a
  DistilBERT-architecture encoder at `dim`, `layers`, `heads`, `hidden_dim`, `dropout`.
  """
  e = ml_collections.ConfigDict()
  e.encoder = encoder  # its runs' text.encoder: skipthoughts | distilbert | bert | roberta
  e.label = label  # its name in the report
  e.text_lr = text_lr  # its finetuned runs' optim.text_lr (frozen runs: 0), a number >= 0
  # Its runs' text.checkpoint; empty: random init (skipthoughts and distilbert only), a stand-in
  # folder under DIR/cache/lm (Skip-thoughts without update_bias: the model's own init).
  e.checkpoint = checkpoint
  # Random-init sizes (empty checkpoint; study/language_models.py). skipthoughts: word_dim and
  # hidden_dim (required), update_bias (the GRU update gate's bias, 2.0 keeps ~88% of the state
  # per word), init_seed (default 0). distilbert: dim, layers, heads (dividing dim), hidden_dim
  # (the feed-forward width; all four required), dropout (default 0.1), init_seed (default 0).
  for k, v in sizes.items():
    e[k] = v
  return e
