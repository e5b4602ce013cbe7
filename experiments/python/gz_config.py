"""Reads a gradzip train config (YAML) for the PyTorch peer arm, without PyYAML.

`parse_yaml` handles the YAML subset gradzip's configs and yaml-cpp's emitter
use: block mappings and sequences, flow `{...}` / `[...]` (also across lines),
plain and quoted scalars, `#` comments. Anything else (anchors, block scalars,
tags) is rejected with the line number. `load_train_config` fills in gradzip's
defaults for the sections the peer reads (run, model, data, optim, schedule,
train, comm; trainer/TrainConfig.cpp, trainer/OptimOptions.cpp,
data/DataOptions.cpp), passes over `compress` and `network`, and rejects other
unknown keys, so a typo is not silently
ignored. Values are not range-checked here: gradzip's own parser does that.
"""
import re

_INT = re.compile(r"^[-+]?(0|[1-9][0-9]*)$")
_FLOAT = re.compile(r"^[-+]?(\.[0-9]+|[0-9]+(\.[0-9]*)?)([eE][-+]?[0-9]+)?$")


class YamlError(ValueError):
    pass


def _scalar(text, where):
    t = text.strip()
    if t[:1] in "\"'":
        if len(t) < 2 or t[-1] != t[0]:
            raise YamlError(f"{where}: unterminated quoted string {t}")
        body = t[1:-1]
        return body.replace("\\\"", "\"").replace("\\\\", "\\") if t[0] == '"' else body.replace("''", "'")
    if t[:1] in "&*!|>":
        raise YamlError(f"{where}: unsupported YAML feature in {t!r} (anchors, tags, block scalars)")
    if t in ("", "~", "null", "Null", "NULL"):
        return None
    if t in ("true", "True", "TRUE"):
        return True
    if t in ("false", "False", "FALSE"):
        return False
    if _INT.match(t):
        return int(t)
    if _FLOAT.match(t):
        return float(t)
    return t


def _strip_comment(line):
    quote = None
    for i, ch in enumerate(line):
        if quote:
            if ch == quote:
                quote = None
        elif ch in "\"'" and (i == 0 or line[i - 1] in " \t[{,:"):
            quote = ch
        elif ch == "#" and (i == 0 or line[i - 1] in " \t"):
            return line[:i].rstrip()
    return line.rstrip()


def _flow(s, pos, where):
    """Parses a flow node starting at s[pos]; returns (value, new pos)."""
    while pos < len(s) and s[pos] == " ":
        pos += 1
    if pos < len(s) and s[pos] in "[{":
        close = "]" if s[pos] == "[" else "}"
        out = [] if close == "]" else {}
        pos += 1
        while True:
            while pos < len(s) and s[pos] in " ,":
                pos += 1
            if pos >= len(s):
                raise YamlError(f"{where}: unterminated flow collection")
            if s[pos] == close:
                return out, pos + 1
            if close == "]":
                v, pos = _flow(s, pos, where)
                out.append(v)
            else:
                k, pos = _flow_scalar(s, pos, ":", where)
                if pos >= len(s) or s[pos] != ":":
                    raise YamlError(f"{where}: expected ':' after key {k!r}")
                v, pos = _flow(s, pos + 1, where)
                if k in out:
                    raise YamlError(f"{where}: duplicate key {k!r}")
                out[k] = v
    return _flow_scalar(s, pos, "", where)


def _flow_scalar(s, pos, stop, where):
    start, quote = pos, None
    while pos < len(s):
        ch = s[pos]
        if quote:
            quote = None if ch == quote else quote
        elif ch in "\"'" and pos == start:
            quote = ch
        elif ch in ",]}" or (ch == ":" and stop and (pos + 1 == len(s) or s[pos + 1] == " ")):
            break
        pos += 1
    return _scalar(s[start:pos], where), pos


def _split_key(text, where):
    """'key: value' -> (key, value text) or None when the line is not a mapping entry."""
    m = re.match(r"^(\"[^\"]*\"|'[^']*'|[^\"'{\[][^:]*?)\s*:(\s+(.*))?$", text)
    if not m:
        return None
    return _scalar(m.group(1), where), (m.group(3) or "")


def parse_yaml(text, name="<yaml>"):
    lines = []  # (indent, text, line number)
    for no, raw in enumerate(text.splitlines(), 1):
        if raw.strip() in ("---", "..."):
            continue
        if "\t" in raw[: len(raw) - len(raw.lstrip())]:
            raise YamlError(f"{name}:{no}: tabs are not allowed for indentation")
        line = _strip_comment(raw)
        if line.strip():
            lines.append([len(line) - len(line.lstrip()), line.strip(), no])
    if not lines:
        return None
    value, i = _block(lines, 0, lines[0][0], name)
    if i != len(lines):
        raise YamlError(f"{name}:{lines[i][2]}: unexpected indentation")
    return value


def _value(lines, i, indent, rest, name):
    """The value after 'key:' or '- ' on line i: inline, or a nested block."""
    where = f"{name}:{lines[i][2]}"
    if rest:
        if rest[0] in "[{":  # a flow collection, possibly continued on the next lines
            j = i
            while rest.count("[") + rest.count("{") > rest.count("]") + rest.count("}") and j + 1 < len(lines):
                j += 1
                rest += " " + lines[j][1]
            v, pos = _flow(rest, 0, where)
            if rest[pos:].strip():
                raise YamlError(f"{where}: unexpected text after a flow collection: {rest[pos:]!r}")
            return v, j + 1
        return _scalar(rest, where), i + 1
    if i + 1 < len(lines) and lines[i + 1][0] > indent and not _starts_block(lines[i + 1][1], name):
        return _value(lines, i + 1, lines[i + 1][0], lines[i + 1][1], name)  # e.g. "key:\n    []"
    if i + 1 < len(lines) and (lines[i + 1][0] > indent or
                               (lines[i + 1][0] == indent and lines[i + 1][1].startswith("- ")
                                and not lines[i][1].startswith("- "))):
        return _block(lines, i + 1, lines[i + 1][0], name)
    return None, i + 1


def _starts_block(text, name):
    """True if a line opens a block sequence or mapping (not a lone flow node or scalar)."""
    if text == "-" or text.startswith("- "):
        return True
    return text[0] not in "[{\"'" and _split_key(text, name) is not None


def _block(lines, i, indent, name):
    if lines[i][1] == "-" or lines[i][1].startswith("- "):
        out = []
        while i < len(lines) and lines[i][0] == indent and (lines[i][1] == "-" or lines[i][1].startswith("- ")):
            item = lines[i][1][2:].strip()
            if item and _starts_block(item, name):
                # "- key: value" / "- - x" start a block whose entries sit at indent + 2.
                lines[i] = [indent + 2, item, lines[i][2]]
                v, i = _block(lines, i, indent + 2, name)
            else:
                v, i = _value(lines, i, indent, item, name)
            out.append(v)
        return out, i
    out = {}
    while i < len(lines) and lines[i][0] == indent:
        where = f"{name}:{lines[i][2]}"
        kv = _split_key(lines[i][1], where)
        if kv is None:
            raise YamlError(f"{where}: expected 'key: value', got {lines[i][1]!r}")
        key, rest = kv
        if key in out:
            raise YamlError(f"{where}: duplicate key {key!r}")
        out[key], i = _value(lines, i, indent, rest, name)
    if i < len(lines) and lines[i][0] > indent:
        raise YamlError(f"{name}:{lines[i][2]}: unexpected indentation")
    return out, i


# The sections and keys the peer reads, with gradzip's defaults. Sections the
# peer ignores are passed over: compress (the peer's hook replaces the plan) and
# network (the launcher, `gradzip launch`/`compare`, applies the emulation).
_DEFAULTS = {
    "run": dict(name="run", out_dir="runs", seed=1, threads=0, deterministic=False),
    "optim": dict(name="sgd", lr=0.1, momentum=0.9, nesterov=False, weight_decay=5e-4, beta1=0.9, beta2=0.999,
                  eps=1e-8, scale_lr_with_world="none"),
    "schedule": dict(name="cosine", warmup_steps=0, step_epochs=30.0, gamma=0.1, min_lr=0.0),
    "train": dict(epochs=1.0, max_steps=0, eval_every=0, eval_batches=0, clip_grad_norm=0.0, patience=0,
                  targets=[], checkpoint_every=0, nan_policy="stop", checksum_every=200),
    "comm": dict(timeout_s=60, bucket_mb=25.0, latency_us=0, overlap=True),
}
_DATA_KEYS = {"dataset", "path", "batch_size", "eval_batch_size", "shuffle", "drop_last", "prefetch", "workers",
              "augment", "normalise", "image_size", "channels", "text"}
_MODEL_KEYS = {"name", "in_channels", "num_classes", "resnet", "bert", "mlp"}
_IGNORED = {"compress", "network"}


def _merge(section, given, defaults, source):
    given = given or {}
    if not isinstance(given, dict):
        raise YamlError(f"{source}: {section}: expected a mapping")
    unknown = set(given) - set(defaults)
    if unknown:
        raise YamlError(f"{source}: {section}: unknown key(s) {sorted(unknown)} (known: {sorted(defaults)})")
    return {**defaults, **given}


def load_train_config(path):
    """The config at `path` as nested dicts with gradzip's defaults filled in."""
    with open(path) as f:
        root = parse_yaml(f.read(), path) or {}
    known = set(_DEFAULTS) | {"model", "data"} | _IGNORED
    unknown = set(root) - known
    if unknown:
        raise YamlError(f"{path}: unknown section(s) {sorted(unknown)} (known: {sorted(known)})")
    cfg = {s: _merge(s, root.get(s), d, path) for s, d in _DEFAULTS.items()}
    model = root.get("model") or {}
    if set(model) - _MODEL_KEYS or "name" not in model:
        raise YamlError(f"{path}: model: needs name; known keys {sorted(_MODEL_KEYS)}, got {sorted(model)}")
    cfg["model"] = model
    data = dict(root.get("data") or {})
    if set(data) - _DATA_KEYS:
        raise YamlError(f"{path}: data: unknown key(s) {sorted(set(data) - _DATA_KEYS)}")
    data.setdefault("dataset", "fashion_mnist")
    data.setdefault("batch_size", 128)
    data.setdefault("eval_batch_size", data["batch_size"])
    data.setdefault("shuffle", True)
    data.setdefault("drop_last", True)
    cfg["data"] = data
    if cfg["train"]["epochs"] <= 0 and cfg["train"]["max_steps"] <= 0:
        raise YamlError(f"{path}: train.epochs: set epochs > 0 or max_steps > 0")
    return cfg


if __name__ == "__main__":
    import json
    import sys

    for p in sys.argv[1:]:
        print(json.dumps(load_train_config(p), indent=1))
