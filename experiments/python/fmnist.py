"""Fashion-MNIST for the PyTorch peer arm, with gradzip's data semantics.

Reads the four IDX .gz files (Debian's dataset-fashion-mnist, as
data/FashionMnist.cpp does), normalises like data/Transforms.cpp
((pixel/255 - mean) / std, defaults from data/DataOptions.cpp: mean 0.2860,
std 0.3530, no augmentation unless configured), and shards like
data/DistributedSampler.cpp: one epoch-seeded permutation shared by every rank,
rank r takes perm[r], perm[r+W], ...; drop_last truncates to floor(N/W) per
rank and drops a partial batch (training), otherwise the permutation wraps
around to ceil(N/W) and the last batch may be partial (evaluation). The
visiting order differs from gradzip's (different RNG); the semantics do not.
"""
import gzip
import os

import numpy as np
import torch

DEFAULT_PATH = "/usr/share/datasets/fashion-mnist"
DEFAULT_MEAN, DEFAULT_STD = 0.2860, 0.3530  # mean/std of the 60k training pixels


def read_idx(path):
    """An IDX file (optionally .gz) as a numpy array of its declared shape."""
    with (gzip.open(path, "rb") if path.endswith(".gz") else open(path, "rb")) as f:
        data = f.read()
    if len(data) < 4 or data[0] != 0 or data[1] != 0 or data[2] != 0x08:
        raise ValueError(f"{path}: not an unsigned-byte IDX file")
    ndim = data[3]
    dims = [int.from_bytes(data[4 + 4 * i: 8 + 4 * i], "big") for i in range(ndim)]
    body = np.frombuffer(data, dtype=np.uint8, offset=4 + 4 * ndim)
    if body.size != int(np.prod(dims)):
        raise ValueError(f"{path}: {body.size} bytes of data, the header declares {dims}")
    return body.reshape(dims)


def load(path=DEFAULT_PATH, train=True):
    """(images uint8 [N, 28, 28], labels int64 [N]) of the train or t10k split."""
    prefix = "train" if train else "t10k"
    files = []
    for stem in (f"{prefix}-images-idx3-ubyte", f"{prefix}-labels-idx1-ubyte"):
        for name in (stem + ".gz", stem):
            if os.path.isfile(os.path.join(path, name)):
                files.append(os.path.join(path, name))
                break
        else:
            raise FileNotFoundError(f"{path}: Fashion-MNIST file {stem}.gz not found "
                                    "(install Debian's dataset-fashion-mnist or set data.path)")
    images, labels = read_idx(files[0]), read_idx(files[1]).astype(np.int64)
    if images.ndim != 3 or labels.ndim != 1 or len(images) != len(labels):
        raise ValueError(f"{files}: expected [N, H, W] images and [N] labels")
    return images, labels


class Sampler:
    """data/DistributedSampler.cpp semantics: disjoint strided shards of an
    epoch-seeded permutation, the same number of steps on every rank."""

    def __init__(self, n, rank, world, batch_size, shuffle=True, drop_last=False, seed=0):
        if not 0 <= rank < world:
            raise ValueError(f"sampler: rank {rank} outside world of size {world}")
        self.n, self.rank, self.world, self.batch = n, rank, world, batch_size
        self.shuffle, self.drop_last, self.seed = shuffle, drop_last, seed
        self.per_rank = n // world if drop_last else -(-n // world)
        self.steps = self.per_rank // batch_size if drop_last else -(-self.per_rank // batch_size)
        if self.steps < 1:
            raise ValueError(f"sampler: {n} examples over {world} ranks give {self.per_rank} per rank, "
                             f"fewer than one batch of {batch_size}")

    def shard(self, epoch):
        perm = np.arange(self.n)
        if self.shuffle:  # same generator on every rank: (seed, "SHUFF", epoch)
            perm = np.random.default_rng([self.seed, 0x5348554646, epoch]).permutation(self.n)
        return perm[(self.rank + np.arange(self.per_rank) * self.world) % self.n]

    def batches(self, epoch):
        s = self.shard(epoch)
        return [s[i * self.batch: (i + 1) * self.batch] for i in range(self.steps)]


class Transform:
    """Random crop with zero padding and flip (per image), then normalisation."""

    def __init__(self, crop_padding=0, flip=False, mean=(DEFAULT_MEAN,), std=(DEFAULT_STD,)):
        self.pad, self.flip = int(crop_padding), bool(flip)
        self.mean, self.std = float(mean[0]), float(std[0])  # one channel

    def __call__(self, images, rng, augment):
        x = images
        if augment and self.pad > 0:  # dst(y, x) = src(y + dy - p, x + dx - p), dy, dx in [0, 2p]
            b, h, w = x.shape
            p = self.pad
            padded = np.pad(x, ((0, 0), (p, p), (p, p)))
            dy = rng.integers(0, 2 * p + 1, b)
            dx = rng.integers(0, 2 * p + 1, b)
            rows = (dy[:, None] + np.arange(h))[:, :, None]
            cols = (dx[:, None] + np.arange(w))[:, None, :]
            x = padded[np.arange(b)[:, None, None], rows, cols]
        if augment and self.flip:
            mirror = rng.random(len(x)) < 0.5
            x = x.copy()
            x[mirror] = x[mirror, :, ::-1]
        t = torch.from_numpy(np.array(x, dtype=np.uint8)).unsqueeze(1).float()  # a copy: x may be read-only
        return t.mul_(1.0 / 255.0).sub_(self.mean).div_(self.std)


class Loader:
    """Batches (float [B, 1, 28, 28], int64 [B]) of one split for one rank."""

    def __init__(self, images, labels, rank, world, batch_size, shuffle, drop_last, seed, transform, augment):
        self.images, self.labels = images, labels
        self.sampler = Sampler(len(images), rank, world, batch_size, shuffle, drop_last, seed)
        self.transform, self.augment = transform, augment
        self.seed, self.rank = seed, rank

    @property
    def steps_per_epoch(self):
        return self.sampler.steps

    def epoch(self, epoch):
        """Yields the batches of `epoch`; augmentation draws depend on (seed, rank, epoch)."""
        rng = np.random.default_rng([self.seed, self.rank, epoch, 0xA06])
        for idx in self.sampler.batches(epoch):
            yield self.transform(self.images[idx], rng, self.augment), torch.from_numpy(self.labels[idx])


def loaders(data, rank, world, seed):
    """(train, test) loaders from the resolved `data:` options of a gradzip config."""
    transform = Transform(data["augment"]["crop_padding"], data["augment"]["flip"],
                          data["normalise"]["mean"], data["normalise"]["std"])
    tr_x, tr_y = load(data["path"], True)
    te_x, te_y = load(data["path"], False)
    train = Loader(tr_x, tr_y, rank, world, data["batch_size"], data["shuffle"], data["drop_last"], seed,
                   transform, augment=True)
    test = Loader(te_x, te_y, rank, world, data["eval_batch_size"], False, False, seed, transform, augment=False)
    return train, test


if __name__ == "__main__":  # a quick look: sizes, pixel statistics, shards
    x, y = load()
    print("train", x.shape, "mean", x.mean() / 255, "std", (x / 255).std(), "labels", np.bincount(y))
    s0, s1 = Sampler(len(x), 0, 2, 64, drop_last=True), Sampler(len(x), 1, 2, 64, drop_last=True)
    assert not set(s0.shard(0)) & set(s1.shard(0)) and s0.steps == s1.steps == 468
    assert not np.array_equal(s0.shard(0), s0.shard(1))
    t = Transform(2, True)(x[:8], np.random.default_rng(0), True)
    print("batch", tuple(t.shape), float(t.mean()), "ok")
