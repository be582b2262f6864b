# Probe part: the job's model (policy `job.model`), found in the resolved Hugging Face hub
# cache (hub/models--ORG--NAME/snapshots/<rev>/) or at a path on the pod.
#
# Reads config.json, model.safetensors.index.json and the header of every .safetensors file
# present (8-byte little-endian length, then JSON naming each tensor's dtype, shape and byte
# range): exact parameter counts and bytes without reading any weights. Also what of the
# weights is already on disk, and the free space of the cache's filesystem. Reads only.

import glob
import json
import os
import re
import struct

from .core import _process_env, _read_text, _root, _text, _time_left
from .storage import _hf_cache, _inspect_path, _mount_for, _parse_mountinfo

# Headers of real checkpoints are a few hundred KB; the format allows up to 100 MB.
_MD_HEADER_LIMIT = 16 << 20
_MD_JSON_LIMIT = 8 << 20
_MD_MAX_FILES = 512
# Scalars of config.json kept for the evaluator (architecture sizes, dtype, tying, experts).
_MD_CONFIG_LIMIT = 200
_MD_NESTED = ("text_config", "llm_config", "language_config")


def _md_read_json(path):
    with open(path, "rb") as handle:
        raw = handle.read(_MD_JSON_LIMIT + 1)
    if len(raw) > _MD_JSON_LIMIT:
        raise ValueError("over %d bytes" % _MD_JSON_LIMIT)
    return json.loads(raw.decode("utf-8", "replace"))


def _md_scalars(document):
    kept = {}
    for key, value in list(document.items())[:_MD_CONFIG_LIMIT]:
        if isinstance(value, bool) or value is None or isinstance(value, (int, float)):
            kept[_text(key, 100)] = value
        elif isinstance(value, str):
            kept[_text(key, 100)] = _text(value, 200)
        elif isinstance(value, list) and all(isinstance(item, str) for item in value[:16]):
            kept[_text(key, 100)] = [_text(item, 200) for item in value[:16]]
    return kept


def _md_config(path):
    document = _md_read_json(path)
    if not isinstance(document, dict):
        raise ValueError("not a JSON object")
    config = _md_scalars(document)
    quant = document.get("quantization_config")
    if isinstance(quant, dict):
        config["quantization"] = _md_scalars(quant)
    for key in _MD_NESTED:
        if isinstance(document.get(key), dict):
            config[key] = _md_scalars(document[key])
    return config


def _md_index(path):
    document = _md_read_json(path)
    if not isinstance(document, dict):
        raise ValueError("not a JSON object")
    metadata = document.get("metadata") if isinstance(document.get("metadata"), dict) else {}
    total = metadata.get("total_size")
    weight_map = document.get("weight_map") if isinstance(document.get("weight_map"), dict) else {}
    shards = sorted({value for value in weight_map.values() if isinstance(value, str)})
    return {
        "total_size": total if isinstance(total, int) and not isinstance(total, bool) and total >= 0 else None,
        "tensors": len(weight_map),
        "shards": [_text(name, 300) for name in shards[:_MD_MAX_FILES]],
    }


def _md_header(path):
    """Parameters and data bytes by dtype from one .safetensors file's header."""
    size = os.path.getsize(path)
    with open(path, "rb") as handle:
        head = handle.read(8)
        if len(head) < 8:
            raise ValueError("shorter than the 8-byte header length")
        (length,) = struct.unpack("<Q", head)
        if length > _MD_HEADER_LIMIT or length + 8 > size:
            raise ValueError("header length %d does not fit (file is %d bytes)" % (length, size))
        header = json.loads(handle.read(length).decode("utf-8", "replace"))
    if not isinstance(header, dict):
        raise ValueError("header is not a JSON object")
    params, data, by_dtype = 0, 0, {}
    for name, tensor in header.items():
        if name == "__metadata__" or not isinstance(tensor, dict):
            continue
        shape, offsets, dtype = tensor.get("shape"), tensor.get("data_offsets"), tensor.get("dtype")
        if not isinstance(shape, list) or not isinstance(offsets, list) or len(offsets) != 2:
            raise ValueError("tensor %s has no shape or data_offsets" % _text(name, 100))
        count = 1
        for dim in shape:
            # type() is int: True and 1.0 are no dimensions.
            if type(dim) is not int or dim < 0:
                raise ValueError("tensor %s has a bad shape" % _text(name, 100))
            count *= dim
        begin, end = offsets
        if type(begin) is not int or type(end) is not int or not 0 <= begin <= end:
            raise ValueError("tensor %s has bad data_offsets" % _text(name, 100))
        params += count
        data += end - begin
        key = dtype if isinstance(dtype, str) else "?"
        by_dtype[key] = by_dtype.get(key, 0) + count
    # A handful of dtype names per file: made safe once each, not once per tensor.
    dtypes = {_text(key, 20): value for key, value in list(by_dtype.items())[:32]}
    return {"params": params, "data_bytes": data, "file_bytes": size, "header_bytes": length + 8, "dtypes": dtypes}


def _md_snapshot(repo_dir):
    """The snapshot folder huggingface_hub would load: refs/main's commit, else the newest."""
    snapshots = os.path.join(repo_dir, "snapshots")
    try:
        with open(os.path.join(repo_dir, "refs", "main")) as handle:
            commit = handle.read(100).strip()
        if commit and "/" not in commit and os.path.isdir(os.path.join(snapshots, commit)):
            return os.path.join(snapshots, commit)
    except OSError:
        pass
    try:
        folders = [os.path.join(snapshots, name) for name in os.listdir(snapshots)]
    except OSError:
        return None
    folders = [path for path in folders if os.path.isdir(path)]
    return max(folders, key=os.path.getmtime) if folders else None


def _md_volume(path, params):
    """Free space of the filesystem that holds `path` (or would, once created)."""
    found = _inspect_path(os.path.abspath(path))
    volume = {key: found.get(key) for key in ("resolved", "exists", "free_bytes", "total_bytes", "error")}
    try:
        text = _read_text(os.path.join(_root(params, "proc"), "self", "mountinfo"), 8 << 20)
        mount = _mount_for(found.get("resolved") or path, _parse_mountinfo(text))
    except OSError:
        mount = None
    if mount is not None:
        volume["mount_point"] = mount["mount_point"]
        volume["fs_type"] = mount["fs_type"]
    return volume


def _md_files(folder, facts, params):
    names = set()
    try:
        names = set(os.listdir(folder))
    except OSError as exc:
        facts["errors"].append(_text("%s: %s" % (folder, exc.strerror or exc), 300))
        return
    facts["files"] = sorted(_text(name, 200) for name in names)[:_MD_MAX_FILES]
    for name, key, reader in (
        ("config.json", "config", _md_config),
        ("model.safetensors.index.json", "index", _md_index),
    ):
        if name in names:
            try:
                facts[key] = reader(os.path.join(folder, name))
            except (OSError, ValueError) as exc:
                facts["errors"].append(_text("%s: %s" % (name, exc), 300))
    wanted = facts["index"]["shards"] if facts.get("index") else sorted(n for n in names if n.endswith(".safetensors"))
    shards = []
    for name in wanted[:_MD_MAX_FILES]:
        entry = {"name": _text(name, 300)}
        path = os.path.join(folder, name)
        # A snapshot entry is a symlink into blobs/ that exists once its download finished.
        if _time_left(params) <= 0.3:
            entry["error"] = "skipped: time budget spent"
        elif os.path.isfile(path):
            try:
                entry.update(_md_header(path))
                entry["present"] = True
            except (OSError, ValueError) as exc:
                entry["present"] = True
                entry["error"] = _text(str(exc), 300)
        else:
            entry["present"] = False
        shards.append(entry)
    facts["shards"] = shards


# An axolotl or LLaMA-Factory config is YAML, which the standard library cannot read: its text
# goes back whole (the evaluator parses it), and only its top-level model key is read here.
_MD_FROM_LIMIT = 256 << 10
_MD_MODEL_KEY = re.compile(r"^(?:base_model|model_name_or_path)[ \t]*:[ \t]*['\"]?([^'\"#\s]+)", re.MULTILINE)


def _md_from_file(path):
    found = {"path": _text(path, 300)}
    try:
        with open(os.path.expanduser(path), "rb") as handle:
            raw = handle.read(_MD_FROM_LIMIT + 1)
    except OSError as exc:
        found["error"] = _text("%s: %s" % (path, exc.strerror or exc), 300)
        return found
    if len(raw) > _MD_FROM_LIMIT:
        found["error"] = "over %d KiB: not a training config" % (_MD_FROM_LIMIT >> 10)
        return found
    found["text"] = _text(raw, _MD_FROM_LIMIT)
    match = _MD_MODEL_KEY.search(found["text"])
    if match:
        found["model"] = _text(match.group(1), 300)
    return found


def collect_model(params):
    job = params.get("job_model")
    if not isinstance(job, dict) or not (job.get("ref") or job.get("from")):
        return None
    from_file = _md_from_file(str(job["from"])) if job.get("from") else None
    ref = str(job.get("ref") or (from_file or {}).get("model") or "")
    facts = {"ref": _text(ref, 300), "errors": [], "found": False}
    if from_file is not None:
        facts["from_file"] = from_file
    if not ref:
        return facts
    env = _process_env()
    home = env.get("HOME") or os.path.expanduser("~")
    if ref.startswith(("/", "~", ".")):
        folder = os.path.expanduser(ref)
        facts["source"] = "path"
        facts["location"] = _text(folder)
        if os.path.isdir(folder):
            facts["found"] = True
            _md_files(folder, facts, params)
        return facts
    if job.get("cache_dir"):
        cache, origin = os.path.expanduser(str(job["cache_dir"])), "job.cache_dir"
    else:
        cache, origin = _hf_cache(env, home)
    facts["source"] = "hf_cache"
    facts["cache"] = {"path": _text(cache), "origin": origin}
    facts["cache"].update(_md_volume(cache, params))
    repo_dir = os.path.join(cache, "models--" + ref.replace("/", "--"))
    facts["location"] = _text(repo_dir)
    snapshot = _md_snapshot(repo_dir) if os.path.isdir(repo_dir) else None
    if snapshot is None:
        return facts
    facts["found"] = True
    facts["snapshot"] = _text(snapshot)
    _md_files(snapshot, facts, params)
    # Bytes of downloads under way (huggingface_hub resumes <blob>.incomplete files).
    partial = 0
    for path in glob.glob(os.path.join(glob.escape(repo_dir), "blobs", "*.incomplete"))[:_MD_MAX_FILES]:
        try:
            partial += os.path.getsize(path)
        except OSError:
            pass
    facts["incomplete_bytes"] = partial
    return facts
