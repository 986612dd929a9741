"""The languages' own compiler front ends, parse-only, over many snippets at once (one process per
4,000 snippets, their paths on its standard input; ``gofmt``: as arguments).

``parses(language, codes)`` says, per snippet, whether it parses, and with which of the language's
snippet wrappers (a lone method inside a class, PHP after ``<?php``); ``parses(language, codes,
wrappers)`` checks each snippet with the wrapper given (the original's, for its attacked version).
The front ends: ``javac``'s parser (``com.sun.source.util.JavacTask.parse``, no attribution), ``gofmt
-e``, PHP's ``token_get_all(..., TOKEN_PARSE)``, ``RubyVM::InstructionSequence.compile`` (``ruby
-c``), ``new vm.Script`` (``node --check``), R's ``parse()``. ``available(language)`` is ``None``
when the front end is installed, else why not (the tests skip with it).
"""

from __future__ import annotations

import functools
import shutil
import subprocess
import tempfile
from pathlib import Path

GOFMT = next((p for p in (shutil.which("gofmt"), "/usr/lib/go-1.19/bin/gofmt", "/usr/lib/go/bin/gofmt") if p), None)

# language -> the wrappers tried in order (as ``csbench.code.languages`` wraps snippets for tree-sitter,
# with a package clause for Go)
WRAPPERS: dict[str, tuple[tuple[str, str], ...]] = {
    "java": (("", ""), ("class __Snippet {\n", "\n}")),
    "javascript": (("", ""), ("class __Snippet {\n", "\n}"), ("({\n", "\n})")),
    "php": (("<?php\n", ""), ("<?php\nclass __Snippet {\n", "\n}"), ("", "")),  # the last: ``<?php ...``
    "go": (("package p\n", ""),),
    "ruby": (("", ""),),
    "r": (("", ""),),
}
EXTENSIONS = {"java": ".java", "javascript": ".js", "php": ".php", "go": ".go", "ruby": ".rb", "r": ".R"}
TOOLS = {"java": "javac", "javascript": "node", "php": "php", "go": "gofmt", "ruby": "ruby", "r": "Rscript"}

JAVA_PARSER = """
import com.sun.source.util.JavacTask;
import java.util.*;
import javax.tools.*;

public class ParseCheck {
    public static void main(String[] args) throws Exception {
        JavaCompiler compiler = ToolProvider.getSystemJavaCompiler();
        DiagnosticCollector<JavaFileObject> found = new DiagnosticCollector<>();
        StandardJavaFileManager files = compiler.getStandardFileManager(found, null, null);
        List<String> paths = new ArrayList<>();
        try (java.io.BufferedReader in = new java.io.BufferedReader(new java.io.InputStreamReader(System.in))) {
            for (String line; (line = in.readLine()) != null; ) {
                if (!line.isEmpty()) paths.add(line);
            }
        }
        JavacTask task = (JavacTask) compiler.getTask(
            null, files, found, List.of("-proc:none", "-Xmaxerrs", "10000000"), null,
            files.getJavaFileObjectsFromStrings(paths));
        task.parse();
        Set<String> failed = new HashSet<>();
        for (Diagnostic<? extends JavaFileObject> d : found.getDiagnostics()) {
            if (d.getKind() == Diagnostic.Kind.ERROR && d.getSource() != null) {
                failed.add(d.getSource().getName());
            }
        }
        for (String path : paths) {
            System.out.println(path + "\\t" + (failed.contains(path) ? 1 : 0));
        }
    }
}
"""
PHP_PARSER = r"""
foreach (file("php://stdin", FILE_IGNORE_NEW_LINES | FILE_SKIP_EMPTY_LINES) as $f) {
    try { token_get_all(file_get_contents($f), TOKEN_PARSE); echo "$f\t0\n"; }
    catch (Throwable $e) { echo "$f\t1\n"; }
}
"""
RUBY_PARSER = r"""
$VERBOSE = nil
STDIN.read.split("\n").each do |f|
  begin
    RubyVM::InstructionSequence.compile(File.read(f, encoding: "UTF-8"))
    puts "#{f}\t0"
  rescue SyntaxError, StandardError
    puts "#{f}\t1"
  end
end
"""
NODE_PARSER = r"""
const fs = require("fs"), vm = require("vm");
for (const f of fs.readFileSync(0, "utf8").split("\n").filter(Boolean)) {
  let ok = 0;
  try { new vm.Script(fs.readFileSync(f, "utf8")); } catch (e) { ok = 1; }
  console.log(f + "\t" + ok);
}
"""
R_PARSER = r"""
for (f in readLines(file("stdin"), warn = FALSE)) {
  bad <- tryCatch({ parse(text = readLines(f, encoding = "UTF-8", warn = FALSE), keep.source = FALSE); 0 },
                  error = function(e) 1)
  cat(f, "\t", bad, "\n", sep = "")
}
"""


def available(language: str) -> str | None:
    """``None`` if the front end of ``language`` is installed, else the reason it is not."""
    tool = GOFMT if language == "go" else shutil.which(TOOLS[language])
    if tool is None:
        return f"{TOOLS[language]} not installed (scripts/setup.sh installs it)"
    if language == "java" and shutil.which("java") is None:
        return "java not installed"
    return None


@functools.cache
def _java_checker() -> Path:
    folder = Path(tempfile.mkdtemp(prefix="csbench-javaparse-"))
    (folder / "ParseCheck.java").write_text(JAVA_PARSER, encoding="utf-8")
    subprocess.run(["javac", "-d", str(folder), str(folder / "ParseCheck.java")], check=True, capture_output=True)
    return folder


CHUNK = 4000  # files per front-end process (javac keeps every parsed tree of its task in memory)


def _failing(language: str, paths: list[Path]) -> set[str]:
    """The paths the front end of ``language`` does not parse (one process per chunk of files, their
    paths on its standard input; gofmt: as arguments)."""
    failed: set[str] = set()
    for i in range(0, len(paths), CHUNK):
        chunk = [str(path) for path in paths[i : i + CHUNK]]
        if language == "go":
            for j in range(0, len(chunk), 2000):  # (a bounded command line)
                part = chunk[j : j + 2000]
                done = subprocess.run([GOFMT, "-e", "-l", *part], capture_output=True, text=True)
                failed.update(path for path in part if f"{path}:" in done.stderr)
            continue
        command = {
            "java": ["java", "-cp", str(_java_checker()) if language == "java" else "", "ParseCheck"],
            "php": ["php", "-d", "error_reporting=0", "-r", PHP_PARSER],
            "ruby": ["ruby", "-e", RUBY_PARSER],
            "javascript": ["node", "-e", NODE_PARSER],
            "r": ["Rscript", "--vanilla", "-e", R_PARSER],
        }[language]
        done = subprocess.run(command, input="\n".join(chunk) + "\n", capture_output=True, text=True)
        verdicts = dict(line.rsplit("\t", 1) for line in done.stdout.splitlines() if "\t" in line)
        if set(verdicts) != set(chunk):
            raise RuntimeError(
                f"{language} front end answered for {len(verdicts)} of {len(chunk)} files: {done.stderr[-800:]}"
            )
        failed.update(path for path, verdict in verdicts.items() if verdict.strip() != "0")
    return failed


def parses(language: str, codes: list[str], wrappers: list[int | None] | None = None) -> list[int | None]:
    """Per snippet, the index in ``WRAPPERS[language]`` of the first wrapper with which the front end
    parses it (``None``: none does). With ``wrappers``, only the wrapper given is tried (``None``:
    the snippet is not checked)."""
    options = WRAPPERS[language]
    result: list[int | None] = [None] * len(codes)
    with tempfile.TemporaryDirectory(prefix=f"csbench-{language}-") as folder:
        todo = list(range(len(codes)))
        for index, (prefix, suffix) in enumerate(options):
            paths, owners = [], []
            for i in todo:
                if wrappers is not None and wrappers[i] != index:
                    continue
                if language == "php" and (index == 2) != codes[i].lstrip().startswith("<?"):
                    continue  # code outside ``<?php`` is text: it always "parses"
                path = Path(folder) / f"s{i}_{index}{EXTENSIONS[language]}"  # (javac's parser: any name)
                path.write_text(prefix + codes[i] + suffix, encoding="utf-8")
                paths.append(path)
                owners.append(i)
            failed = _failing(language, paths) if paths else set()
            for i, path in zip(owners, paths, strict=True):
                if str(path) not in failed:
                    result[i] = index
            todo = [i for i in todo if result[i] is None]
    return result
