"""PyTorch twins of gradzip's C++ models (models/*.cpp), for the DDP peer arm
and the throughput comparison.

Same layer order, parameter names, shapes, defaults and initialisation as
models/ResNet.cpp, models/Vgg.cpp, models/Bert.cpp and models/Mlp.cpp (see
models/README.md). The weights are not bit-identical to gradzip's for the same
seed (the random draws happen in a different order), only the architecture is.

    python gz_models.py --check     # asserts the parameter counts of models/README.md
    python gz_models.py --load RUN_DIR/model.pt --name resnet20 --in-channels 1
                                    # strict-loads gradzip's exported weights into the twin
"""
import argparse

import torch
import torch.nn as nn
import torch.nn.functional as F

CIFAR_RESNETS = ("resnet20", "resnet32", "resnet56", "resnet110")
VGG_CONFIGS = {  # Simonyan & Zisserman Table 1, A/D/E; 0 = 2x2/2 max-pool
    "vgg11": [64, 0, 128, 0, 256, 256, 0, 512, 512, 0, 512, 512, 0],
    "vgg16": [64, 64, 0, 128, 128, 0, 256, 256, 256, 0, 512, 512, 512, 0, 512, 512, 512, 0],
    "vgg19": [64, 64, 0, 128, 128, 0, 256, 256, 256, 256, 0, 512, 512, 512, 512, 0, 512, 512, 512, 512, 0],
}
BERT_DEFAULTS = dict(vocab_size=8192, max_len=128, layers=4, hidden=256, heads=4, intermediate=1024, dropout=0.1)
MLP_DEFAULTS = dict(input_size=784, hidden=(128,))


def _conv(cin, cout, k, stride):
    """Bias-free conv, kaiming-normal fan_out/ReLU (torchvision ResNet)."""
    c = nn.Conv2d(cin, cout, k, stride=stride, padding=k // 2, bias=False)
    nn.init.kaiming_normal_(c.weight, mode="fan_out", nonlinearity="relu")
    return c


class _Shortcut:
    """Identity, projection (option B, registered as `downsample`) or zero-pad (option A)."""

    def __init__(self, owner, cin, cout, stride, zero_pad):
        self.cin, self.cout, self.stride = cin, cout, stride
        self.kind = "identity"
        if stride == 1 and cin == cout:
            return
        if zero_pad:
            self.kind = "zeropad"
            return
        self.kind = "projection"
        owner.downsample = nn.Sequential(_conv(cin, cout, 1, stride), nn.BatchNorm2d(cout))

    def __call__(self, owner, x):
        if self.kind == "projection":
            return owner.downsample(x)
        if self.kind == "identity":
            return x
        sub = x[:, :, :: self.stride, :: self.stride] if self.stride > 1 else x
        return F.pad(sub, (0, 0, 0, 0, 0, self.cout - self.cin))


class BasicBlock(nn.Module):
    expansion = 1

    def __init__(self, cin, planes, stride, zero_pad):
        super().__init__()
        self.conv1 = _conv(cin, planes, 3, stride)
        self.bn1 = nn.BatchNorm2d(planes)
        self.conv2 = _conv(planes, planes, 3, 1)
        self.bn2 = nn.BatchNorm2d(planes)
        self.shortcut = _Shortcut(self, cin, planes, stride, zero_pad)

    def forward(self, x):
        out = self.bn1(self.conv1(x)).relu_()
        out = self.bn2(self.conv2(out))
        return out.add_(self.shortcut(self, x)).relu_()


class Bottleneck(nn.Module):
    expansion = 4

    def __init__(self, cin, planes, stride, zero_pad):
        super().__init__()
        self.conv1 = _conv(cin, planes, 1, 1)
        self.bn1 = nn.BatchNorm2d(planes)
        self.conv2 = _conv(planes, planes, 3, stride)
        self.bn2 = nn.BatchNorm2d(planes)
        self.conv3 = _conv(planes, planes * 4, 1, 1)
        self.bn3 = nn.BatchNorm2d(planes * 4)
        self.shortcut = _Shortcut(self, cin, planes * 4, stride, zero_pad)

    def forward(self, x):
        out = self.bn1(self.conv1(x)).relu_()
        out = self.bn2(self.conv2(out)).relu_()
        out = self.bn3(self.conv3(out))
        return out.add_(self.shortcut(self, x)).relu_()


class ResNet(nn.Module):
    """resnet18/50 (torchvision layout, stem imagenet|cifar) and He et al. §4.2 CIFAR resnets."""

    def __init__(self, name, in_channels=3, num_classes=10, shortcut="projection", stem="imagenet"):
        super().__init__()
        cifar = name in CIFAR_RESNETS
        if name == "resnet18":
            block, blocks, planes = BasicBlock, [2, 2, 2, 2], [64, 128, 256, 512]
        elif name == "resnet50":
            block, blocks, planes = Bottleneck, [3, 4, 6, 3], [64, 128, 256, 512]
        elif cifar:
            n = (int(name[6:]) - 2) // 6  # depth 6n + 2
            block, blocks, planes = BasicBlock, [n, n, n], [16, 32, 64]
        else:
            raise ValueError(f"ResNet: no layout for model '{name}'")
        zero_pad = shortcut == "zeropad"
        if zero_pad and not cifar:
            raise ValueError(f"zeropad shortcut is only for the CIFAR ResNets, not {name}")
        self.in_channels = in_channels
        self.max_pool = not (cifar or stem == "cifar")
        self.conv1 = _conv(in_channels, planes[0], 7 if self.max_pool else 3, 2 if self.max_pool else 1)
        self.bn1 = nn.BatchNorm2d(planes[0])
        channels = planes[0]
        for s, (nb, p) in enumerate(zip(blocks, planes)):
            stage = nn.ModuleList()
            for b in range(nb):
                stage.append(block(channels, p, 2 if (s > 0 and b == 0) else 1, zero_pad))
                channels = p * block.expansion
            self.add_module(f"layer{s + 1}", stage)
        self.num_stages = len(blocks)
        self.fc = nn.Linear(channels, num_classes)

    def forward(self, x):
        x = self.bn1(self.conv1(x)).relu_()
        if self.max_pool:
            x = F.max_pool2d(x, 3, 2, 1)
        for s in range(self.num_stages):
            for block in getattr(self, f"layer{s + 1}"):
                x = block(x)
        return self.fc(F.adaptive_avg_pool2d(x, 1).flatten(1))


class Vgg(nn.Module):
    """VGG-BN features (ceil-mode pools), global average pool, Linear(512, classes)."""

    def __init__(self, name, in_channels=3, num_classes=10):
        super().__init__()
        layers, channels = [], in_channels
        for v in VGG_CONFIGS[name]:
            if v == 0:
                layers.append(nn.MaxPool2d(2, 2, ceil_mode=True))
                continue
            conv = nn.Conv2d(channels, v, 3, padding=1)
            nn.init.kaiming_normal_(conv.weight, mode="fan_out", nonlinearity="relu")
            nn.init.zeros_(conv.bias)
            layers += [conv, nn.BatchNorm2d(v), nn.ReLU(inplace=True)]
            channels = v
        self.features = nn.Sequential(*layers)
        self.classifier = nn.Linear(channels, num_classes)
        nn.init.normal_(self.classifier.weight, 0.0, 0.01)
        nn.init.zeros_(self.classifier.bias)

    def forward(self, x):
        return self.classifier(F.adaptive_avg_pool2d(self.features(x), 1).flatten(1))


def _bert_linear(i, o):
    lin = nn.Linear(i, o)
    nn.init.normal_(lin.weight, 0.0, 0.02)
    nn.init.zeros_(lin.bias)
    return lin


class BertLayer(nn.Module):
    """Post-LN layer: a = LN(x + Drop(W_o MHA(x))); y = LN(a + Drop(W_2 GELU(W_1 a)))."""

    def __init__(self, o):
        super().__init__()
        self.hidden, self.heads, self.p = o["hidden"], o["heads"], o["dropout"]
        self.qkv = _bert_linear(o["hidden"], 3 * o["hidden"])
        self.attn_out = _bert_linear(o["hidden"], o["hidden"])
        self.attn_norm = nn.LayerNorm(o["hidden"], eps=1e-12)
        self.ffn_in = _bert_linear(o["hidden"], o["intermediate"])
        self.ffn_out = _bert_linear(o["intermediate"], o["hidden"])
        self.ffn_norm = nn.LayerNorm(o["hidden"], eps=1e-12)

    def forward(self, x, key_mask=None):
        b, t = x.shape[0], x.shape[1]
        p = self.p if self.training else 0.0
        qkv = self.qkv(x).view(b, t, 3, self.heads, self.hidden // self.heads).permute(2, 0, 3, 1, 4)
        ctx = F.scaled_dot_product_attention(qkv[0], qkv[1], qkv[2], attn_mask=key_mask, dropout_p=p)
        ctx = ctx.transpose(1, 2).reshape(b, t, self.hidden)
        a = self.attn_norm(x + F.dropout(self.attn_out(ctx), p, self.training))
        h = F.gelu(self.ffn_in(a))
        return self.ffn_norm(a + F.dropout(self.ffn_out(h), p, self.training))


class MlmHead(nn.Module):
    """logits = LN(GELU(W_d x + b_d)) E^T + b, E = the token embedding (tied)."""

    def __init__(self, o):
        super().__init__()
        self.dense = _bert_linear(o["hidden"], o["hidden"])
        self.norm = nn.LayerNorm(o["hidden"], eps=1e-12)
        self.decoder = nn.Module()
        self.decoder.bias = nn.Parameter(torch.zeros(o["vocab_size"]))

    def forward(self, x, embedding):
        return F.linear(self.norm(F.gelu(self.dense(x))), embedding, self.decoder.bias)


class Bert(nn.Module):
    """BERT-style MLM encoder: token + position embeddings, N post-LN layers, tied MLM head."""

    def __init__(self, **overrides):
        super().__init__()
        o = dict(BERT_DEFAULTS, **overrides)
        if o["hidden"] % o["heads"]:
            raise ValueError(f"bert.hidden {o['hidden']} is not divisible by bert.heads {o['heads']}")
        self.options = o
        self.token_embedding = nn.Embedding(o["vocab_size"], o["hidden"])
        self.position_embedding = nn.Embedding(o["max_len"], o["hidden"])
        nn.init.normal_(self.token_embedding.weight, 0.0, 0.02)
        nn.init.normal_(self.position_embedding.weight, 0.0, 0.02)
        self.embedding_norm = nn.LayerNorm(o["hidden"], eps=1e-12)
        self.layers = nn.ModuleList(BertLayer(o) for _ in range(o["layers"]))
        self.mlm_head = MlmHead(o)

    def forward(self, ids, attention_mask=None):
        b, t = ids.shape
        if not 1 <= t <= self.options["max_len"]:
            raise ValueError(f"sequence length {t} is outside [1, bert.max_len = {self.options['max_len']}]")
        key_mask = None if attention_mask is None else attention_mask.to(torch.bool).view(b, 1, 1, t)
        p = self.options["dropout"] if self.training else 0.0
        x = self.token_embedding(ids) + self.position_embedding.weight[:t]
        x = F.dropout(self.embedding_norm(x), p, self.training)
        for layer in self.layers:
            x = layer(x, key_mask)
        return self.mlm_head(x, self.token_embedding.weight)


class Mlp(nn.Module):
    """Flatten, Linear+ReLU per hidden width, Linear (PyTorch default init)."""

    def __init__(self, num_classes=10, input_size=784, hidden=(128,)):
        super().__init__()
        widths = [input_size, *hidden, num_classes]
        self.layers = nn.ModuleList(nn.Linear(a, b) for a, b in zip(widths, widths[1:]))

    def forward(self, x):
        x = x.flatten(1)
        for i, layer in enumerate(self.layers):
            x = layer(x)
            if i + 1 < len(self.layers):
                x = torch.relu(x)
        return x


def model_names():
    return sorted(["resnet18", "resnet50", *CIFAR_RESNETS, *VGG_CONFIGS, "bert", "mlp"])


def make_model(name, in_channels=3, num_classes=10, resnet=None, bert=None, mlp=None):
    """The model `name` with gradzip's defaults; resnet/bert/mlp are dicts of
    that family's options (keys as in the YAML: shortcut, stem; vocab_size, ...;
    input_size, hidden). Returned in training mode."""
    if name.startswith("resnet") and name in model_names():
        m = ResNet(name, in_channels, num_classes, **(resnet or {}))
    elif name in VGG_CONFIGS:
        m = Vgg(name, in_channels, num_classes)
    elif name == "bert":
        m = Bert(**(bert or {}))
    elif name == "mlp":
        m = Mlp(num_classes, **dict(MLP_DEFAULTS, **(mlp or {})))
    else:
        raise ValueError(f"unknown model '{name}' (known: {', '.join(model_names())})")
    return m.train()


def parameter_count(model):
    return sum(p.numel() for p in model.parameters())  # parameters() dedupes tied tensors


def _check():
    """Parameter counts from models/README.md and the closed forms behind them."""
    expected = [
        (("resnet20",), dict(), 272_474),
        (("resnet20",), dict(resnet={"shortcut": "zeropad"}), 269_722),
        (("resnet32",), dict(resnet={"shortcut": "zeropad"}), 464_154),
        (("resnet56",), dict(resnet={"shortcut": "zeropad"}), 853_018),
        (("resnet110",), dict(resnet={"shortcut": "zeropad"}), 1_727_962),
        (("resnet18",), dict(num_classes=1000), 11_689_512),
        (("resnet18",), dict(resnet={"stem": "cifar"}), 11_173_962),
        (("resnet50",), dict(num_classes=1000), 25_557_032),
        (("vgg11",), dict(), 9_231_114),
        (("vgg16",), dict(), 14_728_266),
        (("vgg19",), dict(), 20_040_522),
        (("bert",), dict(), 5_363_968),
        (("bert",), dict(bert=dict(vocab_size=30522, max_len=512, layers=12, hidden=768, heads=12,
                                   intermediate=3072)), 109_512_762),
        (("mlp",), dict(), 101_770),
    ]
    for (name,), kwargs, want in expected:
        got = parameter_count(make_model(name, **kwargs))
        assert got == want, f"{name} {kwargs}: {got} parameters, expected {want}"
        print(f"ok  {name:9s} {str(kwargs):60s} {got:>12,d}")
    # CIFAR ResNet zeropad closed form 97,216 n - 21,926 and projection +2,752 (resnet20).
    for depth in (20, 32, 56, 110):
        n = (depth - 2) // 6
        assert parameter_count(make_model(f"resnet{depth}", resnet={"shortcut": "zeropad"})) == 97_216 * n - 21_926
    # BERT: V·H + P·H + 2H + N(4H² + 2HI + I + 9H) + H² + 3H + V.
    v, p, h, i, n = 8000, 128, 256, 1024, 4
    want = v * h + p * h + 2 * h + n * (4 * h * h + 2 * h * i + i + 9 * h) + h * h + 3 * h + v
    assert parameter_count(make_model("bert", bert={"vocab_size": v})) == want
    # Shapes: 28x28 single-channel images work for every image model, BERT gives [B, T, V].
    x = torch.randn(2, 1, 28, 28)
    for name in ("resnet20", "vgg11", "resnet18", "mlp"):
        m = make_model(name, in_channels=1) if name != "mlp" else make_model("mlp")
        assert tuple(m(x).shape) == (2, 10), name
    ids = torch.randint(0, 8192, (2, 16))
    assert tuple(make_model("bert")(ids).shape) == (2, 16, 8192)
    # Parameter names follow gradzip/torchvision.
    names = [k for k, _ in make_model("resnet20").named_parameters()]
    assert names[0] == "conv1.weight" and "layer2.0.downsample.0.weight" in names and names[-1] == "fc.bias"
    names = [k for k, _ in make_model("bert").named_parameters()]
    assert names[0] == "token_embedding.weight" and names[-1] == "mlm_head.decoder.bias"
    print("all model checks passed")


if __name__ == "__main__":
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--check", action="store_true", help="assert the parameter counts of models/README.md")
    ap.add_argument("--load", metavar="MODEL_PT", help="strict-load a gradzip model.pt into the twin --name")
    ap.add_argument("--name", help="model name for --load")
    ap.add_argument("--in-channels", type=int, default=3)
    ap.add_argument("--num-classes", type=int, default=10)
    args = ap.parse_args()
    if args.check:
        _check()
    elif args.load:
        # gradzip writes model.pt with LibTorch's pickler; torch.load's weights_only mode rejects its type tags.
        state = dict(torch.load(args.load, map_location="cpu", weights_only=False))
        twin = make_model(args.name, in_channels=args.in_channels, num_classes=args.num_classes)
        twin.load_state_dict(state, strict=True)
        same_order = [k for k in state if k in dict(twin.named_parameters())] == [k for k, _ in twin.named_parameters()]
        print(f"{args.load}: {len(state)} tensors load strictly into {args.name}; parameter order "
              f"{'matches' if same_order else 'DIFFERS'}")
    else:
        for name in model_names():
            print(f"{name:10s} {parameter_count(make_model(name)):>12,d}")
