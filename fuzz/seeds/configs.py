#!/usr/bin/env python3
"""Seeds fuzz/corpus/{config_load,route_tail}/ with the repository's configs: the shipped
ones, every ```toml block of the docs, and every raw string literal in the tests that looks
like a config (a `[table]` header or a `key = value` line). Idempotent: files are named by
content hash. Run from anywhere; rerun when the examples change."""
import hashlib
import pathlib
import re

root = pathlib.Path(__file__).resolve().parents[2]
out = [root / "fuzz/corpus/config_load", root / "fuzz/corpus/route_tail"]
texts = []
for p in ["config/edgenetd.toml", "packaging/edgenetd.toml", *map(str, root.glob("tests/data/*.toml"))]:
    path = root / p
    if path.is_file():
        texts.append(path.read_text())
for md in [root / "README.md", *root.glob("docs/*.md")]:
    texts += re.findall(r"```toml\n(.*?)```", md.read_text(), re.S)
looks_like_config = re.compile(r"^\s*(\[\[?[a-z_.]+\]\]?|[a-z_]+\s*=)", re.M)
for rs in [*root.glob("tests/*.rs"), *root.glob("src/config/**/*.rs")]:
    for lit in re.findall(r'r#"(.*?)"#', rs.read_text(), re.S):
        if looks_like_config.search(lit) and len(lit) < 20000:
            texts.append(lit)
# A main file with conf.d files (the targets split their input at byte 0x01).
small = sorted((t for t in texts if len(t) < 2000), key=len)
texts += ["\x01".join(small[i : i + n]) for i, n in [(0, 2), (3, 3), (7, 4), (12, 2)]]
for d in out:
    d.mkdir(parents=True, exist_ok=True)
    for t in texts:
        name = hashlib.sha1(t.encode()).hexdigest()[:16]
        (d / name).write_text(t)
print(f"{len(set(texts))} configs into {', '.join(str(d.relative_to(root)) for d in out)}")
