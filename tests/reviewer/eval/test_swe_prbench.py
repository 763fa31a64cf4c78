"""``eval import-swe-prbench`` on a small sample written here in SWE-PRBench's published layout
(prs.jsonl, contexts/config_A/<task>.json, annotations/<task>_human.json)."""

from __future__ import annotations

import json

from dsh_github_reviewer.eval import check_cases, load_cases
from dsh_github_reviewer.eval.swe_prbench import import_dir, rebuild, split_diff

PY_DIFF = """diff --git a/app/paging.py b/app/paging.py
--- a/app/paging.py
+++ b/app/paging.py
@@ -10,6 +10,7 @@ def helper():
 def page(items, n, size):
-    start = n * size
+    start = (n - 1) * size
+    end = start + size + 1
     return items[start:end]


@@ -40,3 +41,4 @@ def count(items, size):
     total = len(items)
     pages = total // size
+    log.debug("pages %d", pages)
     return pages
diff --git a/web/x.js b/web/x.js
--- a/web/x.js
+++ b/web/x.js
@@ -1,1 +1,2 @@
 const a = 1;
+const b = a / 0;
"""
GO_DIFF = """--- /dev/null
+++ b/cmd/main.go
@@ -0,0 +1,5 @@
+package main
+
+func main() {
+	panic("todo")
+}
"""


def _sample(root) -> None:
    (root / "contexts" / "config_A").mkdir(parents=True)
    (root / "annotations").mkdir()
    prs = [{"task_id": "acme__shop-12", "repo": "acme/shop", "pr_number": 12,
            "title": "Pages start at 1", "body": "Make page numbers 1-based."},
           {"task_id": "acme__tool-3", "repo": "acme/tool", "pr_number": 3,
            "title": "Add the CLI"},
           {"task_id": "acme__shop-13", "repo": "acme/shop", "pr_number": 13,
            "title": "No context file"}]
    (root / "prs.jsonl").write_text("".join(json.dumps(p) + "\n" for p in prs))
    (root / "contexts" / "config_A" / "acme__shop-12.json").write_text(
        json.dumps({"task_id": "acme__shop-12", "diff": PY_DIFF}))
    (root / "annotations" / "acme__shop-12_human.json").write_text(json.dumps({"comments": [
        {"path": "app/paging.py", "line": 12, "body": "end is one past the page: off by one",
         "category": "off-by-one"},
        {"file": "app/paging.py", "start_line": 10, "end_line": 10,
         "comment": "the helper above also needs this"},   # a context line: skipped
        {"path": "app/paging.py", "line": 43, "body": "use lazy logging args? fine.",
         "severity": "minor"},
        {"path": "web/x.js", "line": 2, "body": "division by zero"}]}))
    (root / "contexts" / "config_A" / "acme__tool-3.json").write_text(
        json.dumps({"files": [{"filename": "cmd/main.go", "patch": GO_DIFF.split("\n", 2)[2]}]}))
    (root / "annotations" / "acme__tool-3_human.json").write_text(json.dumps([
        {"path": "cmd/main.go", "line": 4, "body": "Do not panic in main; return an error."}]))


def test_rebuilt_files_keep_the_real_line_numbers():
    base, head = rebuild(split_diff(PY_DIFF)["app/paging.py"])
    assert head.splitlines()[11] == "    end = start + size + 1"  # line 12
    assert head.splitlines()[42] == '    log.debug("pages %d", pages)'  # line 43
    assert base.splitlines()[10] == "    start = n * size" and base.splitlines()[0] == ""
    assert len(head.splitlines()) == 44 and len(base.splitlines()) == 42


def test_a_sample_in_the_published_layout_becomes_valid_cases(tmp_path):
    root = tmp_path / "swe-prbench-data" / "dataset"
    root.mkdir(parents=True)
    _sample(root)
    log: list[str] = []
    written = import_dir(tmp_path / "swe-prbench-data", tmp_path / "out", log=log.append)
    assert [p.name for p in written] == ["swe-prbench-acme-shop-12.toml",
                                         "swe-prbench-acme-tool-3.toml"]
    cases = {c.id: c for c in load_cases(tmp_path / "out")}
    assert check_cases(list(cases.values())) == []
    shop = cases["swe-prbench-acme-shop-12"]
    assert shop.language == "python" and shop.title == "Pages start at 1"
    assert "acme/shop#12" in shop.body
    assert set(shop.push[0].files) == {"app/paging.py"}  # the JavaScript file left out
    assert [(d.path, d.lines, d.category, d.severity) for d in shop.defects] == [
        ("app/paging.py", (12, 12), "off-by-one", "major"),
        ("app/paging.py", (43, 43), "wrong-condition", "minor")]
    assert shop.defects[0].description == "end is one past the page: off by one"
    tool = cases["swe-prbench-acme-tool-3"]
    assert tool.language == "go" and tool.defects[0].lines == (4, 4)
    assert any("comment 2: app/paging.py:10-10 is on no added line" in x for x in log)
    assert any("web/x.js: another language" in x for x in log)
    assert any(x.startswith("skipped acme__shop-13") for x in log)
    # --limit
    assert len(import_dir(root, tmp_path / "one", limit=1)) == 1


def test_a_task_id_is_a_file_name_and_one_case_id_is_written_once(tmp_path):
    """Forged input: a task_id of ``../../x`` made the importer read files outside the dataset,
    and two task ids with the same case id (``acme__shop-12`` and ``acme-shop-12``) left only
    the second, silently."""
    root = tmp_path / "data"
    root.mkdir()
    _sample(root)
    outside = tmp_path / "outside"
    outside.mkdir()
    (outside / "x.json").write_text(json.dumps({"diff": PY_DIFF}))
    (outside / "x_human.json").write_text(json.dumps([
        {"path": "app/paging.py", "line": 12, "body": "off by one"}]))
    prs = [{"task_id": "../../outside/x", "repo": "a/b", "pr_number": 1, "title": "t"},
           {"task_id": "acme__shop-12", "repo": "acme/shop", "pr_number": 12, "title": "A"},
           {"task_id": "acme-shop-12", "repo": "acme/shop", "pr_number": 12, "title": "B"}]
    (root / "prs.jsonl").write_text("".join(json.dumps(p) + "\n" for p in prs))
    for name in ("acme-shop-12.json", "acme-shop-12_human.json"):
        src = name.replace("acme-shop-12", "acme__shop-12")
        folder = "contexts/config_A" if "human" not in name else "annotations"
        (root / folder / name).write_text((root / folder / src).read_text())
    log: list[str] = []
    written = import_dir(root, tmp_path / "out", log=log.append)
    assert [p.name for p in written] == ["swe-prbench-acme-shop-12.toml"]
    assert 'title = "A"' in written[0].read_text()
    assert any(x.startswith("skipped ../../outside/x: a task_id is a file name") for x in log)
    assert any("skipped acme-shop-12: its case id swe-prbench-acme-shop-12 is an earlier"
               in x for x in log)
