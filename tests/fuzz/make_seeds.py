# Regenerates the committed seed inputs of the fuzz targets, tests/fuzz/corpus/<target>/seed-*:
# tiny valid examples of each input format, in the byte layout each target expects
# (most targets read a leading mode byte; see the comment at the top of each
# *Fuzz.cpp). Run with the repository's virtual environment, whose Pillow (a
# matplotlib dependency) encodes the image seeds:
#   .venv/bin/python tests/fuzz/make_seeds.py
# Inputs that once crashed a target live beside the seeds as regress-* files and
# are not touched here.
import gzip
import io
import pathlib
import struct
import zlib

from PIL import Image

CORPUS = pathlib.Path(__file__).resolve().parent / "corpus"


def put(target, name, data):
    d = CORPUS / target
    d.mkdir(parents=True, exist_ok=True)
    (d / f"seed-{name}").write_bytes(data)


def idx(dims, payload):
    return bytes([0, 0, 8, len(dims)]) + b"".join(struct.pack(">I", d) for d in dims) + bytes(payload)


def config_seeds():
    put("config", "minimal.yaml", b"run: {name: seed}\ntrain: {epochs: 1}\n")
    put("config", "sections.yaml", b"""run: {name: s, seed: 3, threads: 1, deterministic: true}
model: {name: mlp}
data: {dataset: fashion_mnist, batch_size: 8, augment: {crop_padding: 2, flip: true}, normalise: {mean: [0.5], std: [0.25]}}
optim: {name: sgd, lr: 0.1, momentum: 0.9}
schedule: {name: cosine, warmup_steps: 2}
train: {epochs: 0.5, max_steps: 4, targets: [0.5, 0.8], nan_policy: skip}
comm: {timeout_s: 5, bucket_mb: 1.5, overlap: false}
compress: {name: thc, collective: ps, thc: {bits: 4}}
""")
    put("config", "overrides.yaml", b"--set compress.name=topkc\n--set train.epochs=2\nrun: {name: o}\n")
    put("config", "text.yaml", b"data: {dataset: text_mlm, text: {corpus: [/nonexistent], seq_len: 16}}\nmodel: {name: bert}\n")


def idx_seeds():
    put("idx", "plain-idx1", b"\x00" + idx([3], [1, 2, 3]))
    put("idx", "gzip-idx3", b"\x01" + idx([2, 2, 3], range(12)))
    put("idx", "plain-empty-dim", b"\x00" + idx([0, 28, 28], []))


def cifar_seeds():
    record = bytes([3]) + bytes((i * 7) % 256 for i in range(3072))
    put("cifar10", "one-record", record)


def image_seeds():
    img = Image.new("RGB", (4, 3))
    img.putdata([(i * 40 % 256, i * 90 % 256, i * 17 % 256) for i in range(12)])
    for fmt, ext, mode in [("PNG", "png", "RGB"), ("PNG", "gray.png", "L"), ("JPEG", "jpg", "RGB"),
                           ("BMP", "bmp", "RGB"), ("TIFF", "tif", "RGB"), ("WEBP", "webp", "RGB"),
                           ("PPM", "ppm", "RGB"), ("PPM", "pgm", "L"), ("PPM", "pbm", "1")]:
        buf = io.BytesIO()
        try:
            img.convert(mode).save(buf, format=fmt)
        except (KeyError, OSError):  # a Pillow built without that codec
            continue
        # Mode byte: bit 0 picks 3 channels, bits 1-2 the output size (see ImageFuzz.cpp).
        put("image", ext, bytes([0x03]) + buf.getvalue())


def text_seeds():
    doc = b"Title\n=====\n\nSome prose about the kernel.\nA second line.\n"
    put("text", "plain", b"\x00" + doc)
    put("text", "gzip", b"\x01" + doc)
    put("text", "corrupt-gzip", b"\x02" + gzip.compress(doc, mtime=0)[:30])
    put("text", "directory", b"\x03" + b"\x00".join([doc, b"other doc\n", b"third\n"]))
    put("text", "wikitext", b"\x04" + b" = Article = \n text one\n = Second = \n text two\n\x00 = Valid = \n v\n")


if __name__ == "__main__":
    config_seeds()
    idx_seeds()
    cifar_seeds()
    image_seeds()
    text_seeds()
    print("seeds written under", CORPUS)
