"""ResNet-18/34/50/101/152 image encoder in Flax NNX, in torchvision's layout (v1.5).

The module mirrors torchvision's attribute names (conv1, bn1, layer1..layer4, fc; per block
conv1/bn1/conv2/bn2[/conv3/bn3] and the projection shortcut as down_conv/down_bn) so that
`resnet_params` maps checkpoints onto it one key at a time. Padding is explicit, as in
torchvision ((3,3) for the 7x7 stem, (1,1) for the 3x3 convs and the max-pool; 'SAME' would
pad asymmetrically at stride 2), the bottleneck strides on its 3x3 conv, BatchNorm eps is 1e-5.
"""
import jax.numpy as jnp
from flax import nnx

# depth -> (block kind, blocks per stage)
ARCHS = {
    18: ("basic", (2, 2, 2, 2)),
    34: ("basic", (3, 4, 6, 3)),
    50: ("bottleneck", (3, 4, 6, 3)),
    101: ("bottleneck", (3, 4, 23, 3)),
    152: ("bottleneck", (3, 8, 36, 3)),
}
IMAGENET_MEAN = (0.485, 0.456, 0.406)
IMAGENET_STD = (0.229, 0.224, 0.225)
_KAIMING = nnx.initializers.variance_scaling(2.0, "fan_out", "normal")


def preprocess(images_uint8):
  """uint8 NHWC pixels -> float32 network input: x / 255, minus ImageNet mean, over std.

  The original RSVQA code skipped the division and fed 0..255 minus the (0..1) mean to the
  ImageNet ResNet, which puts its activations far outside the pretrained range; do not repeat it.
  """
  x = jnp.asarray(images_uint8).astype(jnp.float32) / 255.0
  return (x - jnp.asarray(IMAGENET_MEAN)) / jnp.asarray(IMAGENET_STD)


def _conv(cin, cout, size, stride, *, dtype, rngs):
  pad = (size - 1) // 2
  return nnx.Conv(cin, cout, (size, size), strides=stride, padding=((pad, pad), (pad, pad)),
                  use_bias=False, kernel_init=_KAIMING, dtype=dtype, rngs=rngs)


def _bn(channels, *, dtype, rngs):
  # torchvision momentum 0.1 on the new statistic == flax momentum 0.9 on the old one.
  return nnx.BatchNorm(channels, momentum=0.9, epsilon=1e-5, dtype=dtype, rngs=rngs)


class BasicBlock(nnx.Module):
  """Two 3x3 convs with a residual connection (ResNet-18/34)."""
  expansion = 1

  def __init__(self, cin, planes, stride, *, dtype, rngs):
    self.conv1 = _conv(cin, planes, 3, stride, dtype=dtype, rngs=rngs)
    self.bn1 = _bn(planes, dtype=dtype, rngs=rngs)
    self.conv2 = _conv(planes, planes, 3, 1, dtype=dtype, rngs=rngs)
    self.bn2 = _bn(planes, dtype=dtype, rngs=rngs)
    _add_shortcut(self, cin, planes, stride, dtype=dtype, rngs=rngs)

  def __call__(self, x, *, train):
    avg = not train
    y = nnx.relu(self.bn1(self.conv1(x), use_running_average=avg))
    y = self.bn2(self.conv2(y), use_running_average=avg)
    return nnx.relu(y + _shortcut(self, x, avg))


class Bottleneck(nnx.Module):
  """1x1 reduce, 3x3 (carrying the stride), 1x1 expand x4, residual (ResNet-50/101/152)."""
  expansion = 4

  def __init__(self, cin, planes, stride, *, dtype, rngs):
    cout = planes * self.expansion
    self.conv1 = _conv(cin, planes, 1, 1, dtype=dtype, rngs=rngs)
    self.bn1 = _bn(planes, dtype=dtype, rngs=rngs)
    self.conv2 = _conv(planes, planes, 3, stride, dtype=dtype, rngs=rngs)
    self.bn2 = _bn(planes, dtype=dtype, rngs=rngs)
    self.conv3 = _conv(planes, cout, 1, 1, dtype=dtype, rngs=rngs)
    self.bn3 = _bn(cout, dtype=dtype, rngs=rngs)
    _add_shortcut(self, cin, cout, stride, dtype=dtype, rngs=rngs)

  def __call__(self, x, *, train):
    avg = not train
    y = nnx.relu(self.bn1(self.conv1(x), use_running_average=avg))
    y = nnx.relu(self.bn2(self.conv2(y), use_running_average=avg))
    y = self.bn3(self.conv3(y), use_running_average=avg)
    return nnx.relu(y + _shortcut(self, x, avg))


def _add_shortcut(block, cin, cout, stride, *, dtype, rngs):
  """A 1x1 projection when the block changes width or resolution (torchvision `downsample`)."""
  if stride != 1 or cin != cout:
    block.down_conv = _conv(cin, cout, 1, stride, dtype=dtype, rngs=rngs)
    block.down_bn = _bn(cout, dtype=dtype, rngs=rngs)
  else:
    block.down_conv = block.down_bn = None


def _shortcut(block, x, avg):
  if block.down_conv is None:
    return x
  return block.down_bn(block.down_conv(x), use_running_average=avg)


class ResNet(nnx.Module):
  """ResNet of torchvision depth 18/34/50/101/152 on NHWC, already normalised images.

  `width` is the stem width (64 in every torchvision model; smaller only for tests and toy
  pretraining). Returns dict(pooled=[B, C], map=[B, h, w, C]) and `logits` when num_classes is
  set; C = 8 * width * expansion (2048 for 50/101/152, 512 for 18/34). BatchNorm uses its running
  statistics unless train=True, so a frozen encoder is always called with train=False.
  """

  def __init__(self, depth, *, rngs, num_classes=None, dtype=jnp.float32, width=64):
    if depth not in ARCHS:
      raise ValueError(f"ResNet depth must be one of {sorted(ARCHS)}, got {depth}")
    kind, counts = ARCHS[depth]
    block = Bottleneck if kind == "bottleneck" else BasicBlock
    self.depth, self.width, self.num_classes, self.dtype = depth, width, num_classes, dtype
    self.conv1 = _conv(3, width, 7, 2, dtype=dtype, rngs=rngs)
    self.bn1 = _bn(width, dtype=dtype, rngs=rngs)
    cin = width
    stages = []
    for i, count in enumerate(counts):
      planes = width * 2**i
      blocks = []
      for j in range(count):
        stride = 2 if i > 0 and j == 0 else 1
        blocks.append(block(cin, planes, stride, dtype=dtype, rngs=rngs))
        cin = planes * block.expansion
      stages.append(nnx.List(blocks))
    self.layer1, self.layer2, self.layer3, self.layer4 = stages
    self.out_features = cin
    self.fc = nnx.Linear(cin, num_classes, dtype=dtype, rngs=rngs) if num_classes else None

  def __call__(self, images, *, train=False):
    x = nnx.relu(self.bn1(self.conv1(images.astype(self.dtype)), use_running_average=not train))
    x = nnx.max_pool(x, (3, 3), strides=(2, 2), padding=((1, 1), (1, 1)))
    for stage in (self.layer1, self.layer2, self.layer3, self.layer4):
      for block in stage:
        x = block(x, train=train)
    out = {"pooled": x.astype(jnp.float32).mean(axis=(1, 2)), "map": x}
    if self.fc is not None:
      out["logits"] = self.fc(out["pooled"].astype(self.dtype))
    return out
