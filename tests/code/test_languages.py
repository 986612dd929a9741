"""Tests of multi-language extraction, comment removal, filters and near-duplicate keys
(``csbench.code.extract``, ``csbench.code.comments``, ``csbench.code.languages``).

SPEC "Building a corpus from source": documented functions with the doc comment directly above,
query = first paragraph cleaned of comment markers, CodeSearchNet filters; the ``no_comment`` attack
removes all comments and nothing else. Hand-written cases pin the behaviour per language; property
tests run over real code installed on this machine (scripts/setup.sh) and skip, naming the missing
package, where it is absent.

A lone method does not parse on its own in every grammar: snippets are re-parsed with
``parse_snippet``, which wraps them as the language needs (Java / JavaScript methods in a class,
PHP code after ``<?php`` and, for methods, in a class); see ``LanguageSpec.snippet_wrappers``.
"""

from __future__ import annotations

import os
import sys
import sysconfig
import textwrap
import time
from dataclasses import dataclass
from functools import cache
from pathlib import Path

import pytest

from csbench.code.comments import comment_nodes, parse_snippet, remove_comments
from csbench.code.extract import (
    FilterSettings,
    Function,
    clean_doc_comments,
    doc_summary,
    extract_functions,
    normalized_code_key,
    rejection_reason,
)
from csbench.code.languages import LANGUAGES, language_spec
from csbench.code.parsing import parse

sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "benchmarks"))  # the benchmark's source walk
from bench_extract_languages import read_sources


def src(text: str) -> str:
    return textwrap.dedent(text).lstrip("\n")


def by_name(source: str, language: str) -> dict[str, Function]:
    return {fn.func_name: fn for fn in extract_functions(source, language)}


def reasons(source: str, language: str) -> dict[str, str | None]:
    return {fn.func_name: rejection_reason(fn, FilterSettings()) for fn in extract_functions(source, language)}


# --------------------------------------------------------------------------- Go

GO = """\
package shapes

import "fmt"

// Sum returns the sum of the values given.
// It never fails.
//
// More detail that is not part of the query.
//
//go:noinline
func Sum(values []int) int {
	total := 0 // running total
	/* a block
	comment */
	for _, v := range values {
		total += v
	}
	return total
}

// Alone is separated from its comment by a blank line.

func Alone() int {
	a := 1
	b := 2
	return a + b
}

// String formats the point as text for humans.
func (p *Point) String() string {
	s := fmt.Sprintf("%d,%d", p.X, p.Y)
	s += "// not a comment /* nor this */"
	return s
}

/* Scale multiplies the point by the factor k in place. */
func (p *Point[T]) Scale(k int) {
	p.X *= k
	p.Y *= k
}

// TestSum checks that the sum is right.
func TestSum(t *testing.T) {
	if Sum([]int{1, 2}) != 3 {
		t.Fatal("bad")
	}
}
"""


def test_go_extraction():
    fns = by_name(GO, "go")
    assert list(fns) == ["Sum", "Point.String", "Point.Scale", "TestSum"]  # Alone: blank line before func
    total = fns["Sum"]
    assert total.language == "go"
    assert total.query == "Sum returns the sum of the values given. It never fails."
    assert total.docstring == (
        "Sum returns the sum of the values given.\nIt never fails.\n\nMore detail that is not part of the query."
    )  # the //go:noinline directive is not documentation
    assert total.code.startswith("func Sum(values []int) int {\n")  # the doc comment is not part of the code
    assert (total.start_line, total.end_line) == (11, 19)
    assert total.code_no_comment == (
        "func Sum(values []int) int {\n\ttotal := 0\n"
        "\tfor _, v := range values {\n\t\ttotal += v\n\t}\n\treturn total\n}"
    )
    assert fns["Point.Scale"].query == "Scale multiplies the point by the factor k in place."  # a /* */ doc
    assert '"// not a comment /* nor this */"' in fns["Point.String"].code_no_comment
    assert reasons(GO, "go") == {
        "Sum": None,
        "Point.String": "constructor_or_special_method",
        "Point.Scale": None,
        "TestSum": "test_function",
    }


def test_go_string_and_error_are_special_only_as_methods():
    code = "// String returns the name of the thing.\nfunc String() string {\n\ta := 1\n\tb := a\n\treturn b\n}\n"
    assert reasons(code, "go") == {"String": None}
    code = code.replace("func String()", "func (e *E) Error()").replace("// String", "// Error")
    assert reasons(code, "go") == {"E.Error": "constructor_or_special_method"}


@pytest.mark.parametrize(
    ("code", "expected"),
    [
        ("x := 1 // c\ny := 2\n", "x := 1\ny := 2\n"),
        ("// whole line\n\t// indented\nx := 1\n", "x := 1\n"),
        ("x := 1 /* a */ + 2\n", "x := 1 + 2\n"),
        ("f(/* a */ x, y /* b */)\n", "f(x, y)\n"),
        ("a := b/*c*/+d\n", "a := b +d\n"),
        # a multi-line comment between tokens acts as a line break (automatic semicolons): keep one
        ("return x /* m\n*/ + y\n", "return x\n+ y\n"),
        ('s := "// no" + `/* raw */` // yes\nt := s\n', 's := "// no" + `/* raw */`\nt := s\n'),
        ("r := '/' // rune\nt := r\n", "r := '/'\nt := r\n"),
        ("x := 1 // c\r\ny := 2\r\n", "x := 1\r\ny := 2\r\n"),
    ],
)
def test_go_remove_comments(code, expected):
    assert remove_comments(code, "go") == expected


# --------------------------------------------------------------------------- Java

JAVA = """\
package shapes;

/** A widget. */
public class Widget {
    private int w, h;

    /**
     * Returns the area of the widget
     * in square units.
     *
     * <p>Second paragraph.
     *
     * @return the area
     */
    @Override
    public int area() {
        // compute
        int a = w * h; /* inline */
        String s = "// not a comment /* nor this */";
        return a;
    }

    /** Creates a widget with the given size.
     * @param size the size */
    public Widget(int size) {
        this.w = size;
        this.h = size;
    }

    /** Returns a text form of the widget for logs. */
    public String toString() {
        String s = "Widget";
        s += w;
        return s;
    }

    /** Not directly above its method. */

    public int orphan() {
        int x = 1;
        return x;
    }

    // A line comment is not Javadoc.
    public int undocumented() {
        int x = 1;
        return x;
    }

    /** Ok. */
    public int shortDoc() {
        int x = 1;
        return x;
    }

    interface Shape {
        /**
         * Computes the perimeter of the shape in units.
         * <p>
         * More.
         */
        default int perimeter() {
            int p = 0;
            return p;
        }

        /** Abstract methods have no body and are skipped. */
        int sides();
    }

    enum Color {
        RED;

        /** Returns the color name in lower case letters. */
        String lower() {
            String n = name();
            return n.toLowerCase();
        }
    }
}
"""


def test_java_extraction():
    fns = by_name(JAVA, "java")
    assert list(fns) == [
        "Widget.area",
        "Widget.Widget",
        "Widget.toString",
        "Widget.shortDoc",
        "Widget.Shape.perimeter",
        "Widget.Color.lower",
    ]
    area = fns["Widget.area"]
    assert area.query == "Returns the area of the widget in square units."
    assert area.docstring == (
        "Returns the area of the widget\nin square units.\n\n<p>Second paragraph.\n\n@return the area"
    )
    # annotations sit between the Javadoc and the method: they belong to the code, the Javadoc does not
    assert area.code.startswith("@Override\npublic int area() {\n    // compute\n")
    assert area.code_no_comment == (
        "@Override\npublic int area() {\n    int a = w * h;\n"
        '    String s = "// not a comment /* nor this */";\n    return a;\n}'
    )
    assert fns["Widget.Widget"].query == "Creates a widget with the given size."  # @param ends the paragraph
    assert fns["Widget.Shape.perimeter"].query == "Computes the perimeter of the shape in units."  # <p> ends it
    assert reasons(JAVA, "java") == {
        "Widget.area": None,
        "Widget.Widget": "constructor_or_special_method",
        "Widget.toString": "constructor_or_special_method",
        "Widget.shortDoc": "short_query",
        "Widget.Shape.perimeter": None,
        "Widget.Color.lower": None,
    }


@pytest.mark.parametrize("name", ["toString", "equals", "hashCode", "compareTo", "clone", "finalize"])
def test_java_standard_methods_are_dropped(name):
    code = (
        "class A {\n  /** Does the standard thing for this class. */\n"
        f"  int {name}() {{\n    int x = 1;\n    return x;\n  }}\n}}\n"
    )
    assert reasons(code, "java") == {f"A.{name}": "constructor_or_special_method"}


def test_java_nested_class_constructor_is_dropped():
    code = (
        "class Outer {\n  static class Inner {\n    /** Makes an inner object from nothing. */\n"
        "    Inner() {\n      a();\n      b();\n    }\n  }\n}\n"
    )
    assert reasons(code, "java") == {"Outer.Inner.Inner": "constructor_or_special_method"}


@pytest.mark.parametrize(
    ("code", "expected"),
    [
        ("// c\nint x;", "int x;"),
        ("int a /* x */, b; // y\nint c;\n", "int a, b;\nint c;\n"),
        ("int c = a/*c*/+b;\n", "int c = a +b;\n"),
        ("    /* lead */ int x = 1;\n", "    int x = 1;\n"),
        ("/**\n * Javadoc inside code.\n */\nvoid f() {}\n", "void f() {}\n"),
        ("String s = \"/* no */ // no\"; char c = '/'; /* yes */\n", "String s = \"/* no */ // no\"; char c = '/';\n"),
        ("/* a */ /* b */\nint x;\n", "int x;\n"),
    ],
)
def test_java_remove_comments(code, expected):
    assert remove_comments(code, "java") == expected


# --------------------------------------------------------------------------- JavaScript

JS = """\
/**
 * Creates an array of elements split into groups
 * the length of `size`.
 *
 * @param {Array} array The array to process.
 * @returns {Array} Returns the new array of chunks.
 */
function chunk(array, size) {
  var url = "http://example.org/*not*/"; // a comment
  var re = /\\/\\*x/;
  return [array, size, url, re];
}

/** Adds two values together in one step. */
const add = (a, b) => {
  return a + b; // sum
};

/**
 * Sends a response body to the client now.
 */
res.send = function send(body) {
  this.body = body;
  return this;
};

class Queue {
  /** Adds an item to the end of the queue. */
  push(item) {
    this.items.push(item);
    return this;
  }

  /** Creates the queue with no items at all. */
  constructor() {
    this.items = [];
    this.size = 0;
  }
}

var helpers = {
  /** Formats a date as an ISO string value. */
  format: function (d) {
    var s = d.toISOString();
    return s;
  },

  /** Parses an ISO date string into a date. */
  parse(s) {
    var d = new Date(s);
    return d;
  }
};

/** @private */
function hidden() {
  return 1;
}

// A line comment is not JSDoc, so this function is undocumented.
function plain() {
  return 2;
}

/** Exported function that doubles a number. */
export function double(x) {
  var y = x * 2;
  return y;
}

;(function() {
  /** Nested in an IIFE, as in lodash.js itself. */
  function inner(a) {
    var b = a;
    return b;
  }
}());
"""


def test_javascript_extraction():
    fns = by_name(JS, "javascript")
    assert list(fns) == [
        "chunk",
        "add",
        "res.send",
        "Queue.push",
        "Queue.constructor",
        "helpers.format",
        "helpers.parse",
        "double",
        "inner",
    ]  # hidden: only a tag, no text; plain: a // comment is not JSDoc
    chunk = fns["chunk"]
    assert chunk.query == "Creates an array of elements split into groups the length of `size`."
    assert chunk.code_no_comment == (
        'function chunk(array, size) {\n  var url = "http://example.org/*not*/";\n'
        "  var re = /\\/\\*x/;\n  return [array, size, url, re];\n}"
    )
    assert fns["add"].code.startswith("const add = (a, b) => {")
    assert fns["res.send"].code.startswith("res.send = function send(body) {")
    assert fns["helpers.format"].code == "format: function (d) {\n  var s = d.toISOString();\n  return s;\n}"
    assert fns["double"].code.startswith("export function double(x)")
    assert reasons(JS, "javascript")["Queue.constructor"] == "constructor_or_special_method"
    assert {k for k, v in reasons(JS, "javascript").items() if v} == {"Queue.constructor"}


@pytest.mark.parametrize("name", ["constructor", "toString", "valueOf"])
def test_javascript_standard_methods_are_dropped(name):
    code = (
        f"class A {{\n  /** Does the standard thing for this class. */\n  {name}() {{\n    a();\n    b();\n  }}\n}}\n"
    )
    assert reasons(code, "javascript") == {f"A.{name}": "constructor_or_special_method"}


@pytest.mark.parametrize(
    ("code", "expected"),
    [
        ("x = 1; // c\n/* d */\ny = 2;\n", "x = 1;\ny = 2;\n"),
        ("var re = /\\/\\/x/; // yes\nre;\n", "var re = /\\/\\/x/;\nre;\n"),
        ("var t = `a /* b */ ${x}`; /* d */ y();\n", "var t = `a /* b */ ${x}`; y();\n"),
        # a multi-line comment between tokens is a line terminator for automatic semicolon insertion
        ("return /* a\n b */ x;\n", "return\nx;\n"),
        ("  /** doc */ static m() { return 1 }\n", "  static m() { return 1 }\n"),
        ("#!/usr/bin/env node\n// c\nrun();\n", "#!/usr/bin/env node\nrun();\n"),
    ],
)
def test_javascript_remove_comments(code, expected):
    assert remove_comments(code, "javascript") == expected


# --------------------------------------------------------------------------- PHP

PHP = """\
<?php
namespace App;

#[Attribute]
class Greeter
{
    /**
     * Builds a greeting for the given name.
     *
     * @param string $name
     */
    #[Pure]
    public function greet(string $name): string
    {
        # hash comment
        $s = "Hello # not a comment // nor this";
        return $s . $name; // trailing
    }

    /** Creates a greeter with default settings. */
    public function __construct()
    {
        $this->a = 1;
        $this->b = 2;
    }

    /** Converts the greeter into a string value. */
    public function __toString(): string
    {
        $s = "greeter";
        return $s;
    }
}

/**
 * Formats a number with thousands separators.
 */
function format_number($n)
{
    $s = number_format($n);
    return $s;
}
"""


def test_php_extraction():
    fns = by_name(PHP, "php")
    assert list(fns) == ["Greeter.greet", "Greeter.__construct", "Greeter.__toString", "format_number"]
    greet = fns["Greeter.greet"]
    assert greet.query == "Builds a greeting for the given name."
    assert greet.code_no_comment == (
        "#[Pure]\npublic function greet(string $name): string\n{\n"
        '    $s = "Hello # not a comment // nor this";\n    return $s . $name;\n}'
    )  # #[Pure] is an attribute, not a comment
    assert reasons(PHP, "php") == {
        "Greeter.greet": None,
        "Greeter.__construct": "constructor_or_special_method",
        "Greeter.__toString": "constructor_or_special_method",
        "format_number": None,
    }


@pytest.mark.parametrize(
    ("code", "expected"),
    [
        # a lone method (as in CodeSearchNet's PHP): no open tag is added to the result
        (
            "public function f() { # c\n    #[Attr]\n    return '# no'; // c\n}",
            "public function f() {\n    #[Attr]\n    return '# no';\n}",
        ),
        ("<?php\n// c\n$x = 1; /* d */\n", "<?php\n$x = 1;\n"),
        (
            "function f() {\n    // c\n    return <<<EOT\n# not\nEOT;\n}\n",
            "function f() {\n    return <<<EOT\n# not\nEOT;\n}\n",
        ),
    ],
)
def test_php_remove_comments(code, expected):
    assert remove_comments(code, "php") == expected


# --------------------------------------------------------------------------- Ruby

RUBY = """\
module Shapes
  # A circle.
  class Circle
    # Computes the area of the circle from its radius.
    #
    # More detail here.
    def area
      # pi r squared
      x = "# not a comment"
      Math::PI * @r * @r # trailing
    end

    # Creates a circle of the given radius.
    def initialize(r)
      @r = r
      @d = 2 * r
    end

    # Builds a unit circle for quick use.
    def self.unit
      c = new(1)
      c
    end

    # Not directly above.

    def orphan
      1
    end

=begin
a block comment
=end
    # Compares two circles by their radius.
    def ==(other)
      other.is_a?(Circle) &&
        other.r == @r
    end
  end
end
"""


def test_ruby_extraction():
    fns = by_name(RUBY, "ruby")
    assert list(fns) == ["Shapes.Circle.area", "Shapes.Circle.initialize", "Shapes.Circle.unit", "Shapes.Circle.=="]
    area = fns["Shapes.Circle.area"]
    assert area.query == "Computes the area of the circle from its radius."
    assert area.code_no_comment == 'def area\n  x = "# not a comment"\n  Math::PI * @r * @r\nend'
    assert reasons(RUBY, "ruby") == {
        "Shapes.Circle.area": None,
        "Shapes.Circle.initialize": "constructor_or_special_method",
        "Shapes.Circle.unit": None,
        "Shapes.Circle.==": "constructor_or_special_method",
    }


@pytest.mark.parametrize("name", ["initialize", "to_s", "inspect", "==", "hash", "eql?", "<=>"])
def test_ruby_standard_methods_are_dropped(name):
    code = f"class A\n  # Does the standard thing for this class.\n  def {name}(o)\n    a\n    b\n  end\nend\n"
    assert reasons(code, "ruby") == {f"A.{name}": "constructor_or_special_method"}


@pytest.mark.parametrize(
    ("code", "expected"),
    [
        ('x = "#{a} # b" # c\ny = x\n', 'x = "#{a} # b"\ny = x\n'),
        ("a = 1\n=begin\nblock\n=end\nb = 2\n", "a = 1\nb = 2\n"),
        ("s = <<~EOS # c\n  # kept: heredoc text\nEOS\n", "s = <<~EOS\n  # kept: heredoc text\nEOS\n"),
        ("x = %q(# no) # yes\ny = x\n", "x = %q(# no)\ny = x\n"),
        ("def f\n  1 # c\nend\n__END__\n# data, not code\n", "def f\n  1\nend\n__END__\n# data, not code\n"),
    ],
)
def test_ruby_remove_comments(code, expected):
    assert remove_comments(code, "ruby") == expected


# --------------------------------------------------------------------------- R

R = """\
#' Add two numbers together safely
#'
#' @param x a number
#' @param y another number
#' @export
add <- function(x, y) {
  # add them
  s <- "# not a comment"
  x + y # trailing
}

# Scale a vector by a constant factor
scale_by = function(v, k) v * k

#' Separated by a blank line

mult <- function(a, b) {
  a * b
}

#' @title Subtract the second number from the first
#' @param a a number
minus <- function(a, b) {
  d <- a - b
  d
}

#' Run the checks on the data given here
test.data <- function(d) {
  a <- 1
  d
}
"""


def test_r_extraction():
    fns = by_name(R, "r")
    assert list(fns) == ["add", "scale_by", "minus", "test.data"]
    add = fns["add"]
    assert add.query == "Add two numbers together safely"
    assert add.docstring.startswith("Add two numbers together safely\n\n@param x a number")
    assert add.code_no_comment == 'add <- function(x, y) {\n  s <- "# not a comment"\n  x + y\n}'
    assert fns["minus"].query == "Subtract the second number from the first"  # an explicit @title
    assert reasons(R, "r") == {"add": None, "scale_by": "short_code", "minus": None, "test.data": "test_function"}


@pytest.mark.parametrize(
    ("code", "expected"),
    [
        ("x <- '#' # c\ny <- x\n", "x <- '#'\ny <- x\n"),
        ("#' roxygen\n## plain\nf <- function() 1\n", "f <- function() 1\n"),
        ('paste("a#b", # c\n  "d")\n', 'paste("a#b",\n  "d")\n'),
    ],
)
def test_r_remove_comments(code, expected):
    assert remove_comments(code, "r") == expected


# --------------------------------------------------------------------------- all languages

HAND = {"go": GO, "java": JAVA, "javascript": JS, "php": PHP, "ruby": RUBY, "r": R}


@pytest.mark.parametrize("language", sorted(HAND))
def test_hand_sources_parse_and_code_excludes_the_doc_comment(language):
    assert not parse(HAND[language], language).root_node.has_error
    for fn in extract_functions(HAND[language], language):
        assert fn.language == language
        first_line = fn.code.splitlines()[0].strip()
        assert not first_line.startswith(("//", "/*", "#")) or first_line.startswith("#["), fn.func_name
        assert HAND[language].splitlines()[fn.start_line - 1].strip() == first_line
        assert not parse_snippet(fn.code_no_comment, language).tree.root_node.has_error, fn.func_name


@pytest.mark.parametrize("language", sorted(HAND))
def test_remove_comments_changes_no_other_token(language):
    """Every token but comments is kept, in order: the near-duplicate key (comments excluded) of the
    code equals the key of the code without comments."""
    source = HAND[language]
    stripped = remove_comments(source, language)
    assert stripped != source
    assert normalized_code_key(stripped, language) == normalized_code_key(source, language)
    assert not comment_nodes(parse(stripped, language).root_node, language_spec(language).comment_types)
    assert remove_comments(stripped, language) == stripped  # nothing left to remove


@pytest.mark.parametrize("language", sorted(LANGUAGES))
def test_code_without_comments_is_returned_unchanged(language):
    code = {
        "python": "def f(x):\n    return '#' + x\n",
        "go": 'func f() string {\n\treturn "//"\n}\n',
        "java": 'String f() {\n    return "/* */";\n}\n',
        "javascript": "function f() {\n  return '//' + /\\/\\*/.source;\n}\n",
        "php": "function f() {\n    return '# //';\n}\n",
        "ruby": "def f\n  '#'\nend\n",
        "r": "f <- function() '#'\n",
    }[language]
    assert remove_comments(code, language) == code


def test_unsupported_language_is_not_implemented():
    with pytest.raises(NotImplementedError, match="cobol"):
        remove_comments("* c", "cobol")
    with pytest.raises(NotImplementedError, match="cobol"):
        extract_functions("* c", "cobol")


@pytest.mark.parametrize(
    ("language", "code"),
    [
        ("java", "@Override\npublic Widget(int size) {\n    this.size = size;\n}"),
        ("javascript", "static get size() {\n  return this.n;\n}"),
        ("php", "public static function f(): int\n{\n    return 1;\n}"),
        ("php", "function f() {\n    return 1;\n}"),
    ],
)
def test_lone_methods_parse_in_their_wrapper(language, code):
    snippet = parse_snippet(code, language)
    assert not snippet.tree.root_node.has_error
    wrapped = snippet.tree.root_node.text
    assert wrapped[snippet.offset : snippet.end] == code.encode()


@pytest.mark.parametrize(
    ("language", "a", "b"),
    [
        ("go", 'func f() string {\n\treturn "a\\n" // c\n}', 'func f() string {\n\treturn "b\\n"\n}'),
        ("java", 'String f() { return "a\\n"; }', 'String f() {\n    return "b\\n"; /* c */\n}'),
        ("javascript", "function f() { return 'a\\n'; }", "function f() {\n  return 'b\\n'; // c\n}"),
        ("php", 'function f() { return "a\\n$x"; }', 'function f() {\n    return "b\\n$x"; # c\n}'),
        ("ruby", 'def f\n  "a\\n#{x}"\nend', 'def f\n  "b\\n#{x}" # c\nend'),
        ("r", 'f <- function() "a\\n"', 'f <- function() {"b\\n"} # c'),
    ],
)
def test_normalized_code_key_per_language(language, a, b):
    """Strings are single tokens (escapes included), comments and layout do not count."""
    same_as_b = b.replace('"b', '"a').replace("'b", "'a")
    key_a = normalized_code_key(a, language)
    assert key_a != normalized_code_key(b, language)  # the string literals differ
    if language != "r":  # the R pair also differs in its braces
        assert key_a == normalized_code_key(same_as_b, language)
    literal = {"javascript": "'a\\n'", "ruby": '"a\\n#{x}"', "php": '"a\\n$x"'}.get(language, '"a\\n"')
    assert f" {literal} " in f" {key_a} "


def test_normalized_code_key_of_lone_method_leaves_out_the_wrapper():
    key = normalized_code_key("public function f() {\n    return 1;\n}", "php")
    assert key == "public function f ( ) { return 1 ; }"
    assert normalized_code_key("int f() { return 1; }", "java") == "int f ( ) { return 1 ; }"


@pytest.mark.parametrize(
    ("comment", "language", "expected"),
    [
        ("/**\n * One.\n * Two.\n *\n * Three.\n */", "java", "One.\nTwo.\n\nThree."),
        ("/** One line. **/", "php", "One line."),
        ("/*******************\n * Boxed text.\n *******************/", "java", "Boxed text."),
        ("/**\n   No stars here.\n   Indented.\n */", "javascript", "No stars here.\nIndented."),
        ("// One.\n//   indented code\n// Two.", "go", "One.\n  indented code\nTwo."),
        ("#' Title.\n#'\n#' @param x", "r", "Title.\n\n@param x"),
        ("## Plain R comment.", "r", "Plain R comment."),
        ("# Ruby doc.\n# rubocop:disable Metrics", "ruby", "Ruby doc."),
    ],
)
def test_clean_doc_comments(comment, language, expected):
    spec = language_spec(language)
    parts = [comment.encode()] if spec.doc_style == "doc_block" else [ln.encode() for ln in comment.split("\n")]
    assert clean_doc_comments(parts, spec) == expected


@pytest.mark.parametrize(
    ("doc", "html", "expected"),
    [
        ("First line\ncontinues.\n\nSecond.", False, "First line continues."),
        ("Does a thing.\n@param x the x", False, "Does a thing."),
        ("Does a thing.\n<p>More.", True, "Does a thing."),
        ("Does a thing.\n<p>More.", False, "Does a thing. <p>More."),
        ("@title The title\n@param x", False, "The title"),
        ("@private", False, ""),
        ("Mentions @param mid-line.", False, "Mentions @param mid-line."),
    ],
)
def test_doc_summary(doc, html, expected):
    assert doc_summary(doc, html_paragraphs=html) == expected


# --------------------------------------------------------------------------- real code

FILES_PER_LANGUAGE = 300  # spread evenly over the sorted file list: every k-th file
R_SOURCE = Path(
    os.environ.get("CSBENCH_R_SOURCE", str(Path(__file__).resolve().parents[2] / ".sources" / "r-cran-src"))
)
R_HINT = (
    "set CSBENCH_R_SOURCE, or unpack the .orig.tar.gz of Debian source packages r-cran-glue, r-cran-stringr "
    "and r-cran-purrr there: apt-get update / apt-get source --download-only with "
    "-o Dir::Etc::SourceList=<a file with one deb-src line> -o Dir::Etc::SourceParts=/dev/null "
    "-o Dir::State::Lists=<tmp dir> -o Dir::Cache=<tmp dir>"
)
SOURCES: dict[str, tuple[str, tuple[str, ...], str]] = {
    # language: (root, suffixes, what provides it)
    "python": (sysconfig.get_paths()["stdlib"], (".py",), "the running Python"),
    "go": ("/usr/share/go-1.19/src", (".go",), "Debian package golang-1.19-src"),
    "java": ("/usr/lib/jvm/openjdk-17/lib/src.zip", (".java",), "Debian package openjdk-17-source"),
    "javascript": ("/usr/share/nodejs", (".js",), "Debian packages node-lodash node-express"),
    "php": ("/usr/share/php", (".php",), "Debian packages php-symfony-console php-monolog ..."),
    "ruby": ("/usr/lib/ruby/3.1.0", (".rb",), "Debian package libruby3.1"),
    "r": (str(R_SOURCE), (".R", ".r"), R_HINT),
}


def evenly(items: list, limit: int | None) -> list:
    """A deterministic sample of a sorted list: every k-th item, at most ``limit``."""
    if not limit or len(items) <= limit:
        return items
    return items[:: len(items) // limit][:limit]


def real_source_files(language: str, limit: int | None = FILES_PER_LANGUAGE) -> list[tuple[str, bytes]]:
    """(path, content) of ``limit`` source files spread evenly over the sorted path list (Java:
    members of src.zip; JavaScript: lodash and express; R: package R/ directories), [] if the
    source is missing."""
    return read_sources(language, limit, pick=evenly)  # the benchmark's file walk (same roots)


@dataclass
class RealResult:
    files: int
    functions: list[tuple[str, Function]]
    kept: int
    clean_snippets: int  # snippets whose code parses without error (in their wrapper)
    failures: dict[str, list[str]]
    seconds: float


C_MARKERS = ("//", "/*", "*/", "* ")
HASH_MARKERS = ("#'", "# ")
MARKER_STARTS = {  # the comment markers of each language (a '#' is text in Go, Java, JavaScript)
    "go": C_MARKERS,
    "java": C_MARKERS,
    "javascript": C_MARKERS,
    "php": C_MARKERS + HASH_MARKERS,
    "python": HASH_MARKERS,
    "ruby": HASH_MARKERS,
    "r": HASH_MARKERS,
}


def has_comment_marker(query: str, language: str) -> bool:
    markers = MARKER_STARTS[language]
    if query.startswith(markers):
        return True
    if "/*" in markers and ("/**" in query or query.endswith("*/")):
        return True
    return "#'" in markers and "#'" in query


@cache
def real_result(language: str) -> RealResult:
    files = real_source_files(language)
    if not files:
        pytest.skip(f"no {language} source at {SOURCES[language][0]} ({SOURCES[language][2]})")
    return check_files(language, files)


def check_files(language: str, files: list[tuple[str, bytes]]) -> RealResult:
    """Extract from ``files`` and check every function (see the tests below for the properties)."""
    started = time.perf_counter()
    spec = language_spec(language)
    functions: list[tuple[str, Function]] = []
    failures: dict[str, list[str]] = {"comment_left": [], "new_error": [], "token_changed": [], "query": []}
    kept = clean = 0
    for path, data in files:
        try:
            text = data.decode("utf-8")
        except UnicodeDecodeError:
            continue
        for fn in extract_functions(text, language):
            where = f"{path}:{fn.start_line} {fn.func_name}"
            functions.append((path, fn))
            kept += rejection_reason(fn, FilterSettings()) is None
            if not fn.query or has_comment_marker(fn.query, language):
                failures["query"].append(f"{where}: {fn.query!r}")
            after = parse_snippet(fn.code_no_comment, language).tree.root_node
            if comment_nodes(after, spec.comment_types):
                failures["comment_left"].append(where)
            if parse_snippet(fn.code, language).tree.root_node.has_error:
                continue
            clean += 1
            if after.has_error:
                failures["new_error"].append(where)
            elif language != "python" and normalized_code_key(fn.code, language) != normalized_code_key(
                fn.code_no_comment, language
            ):
                failures["token_changed"].append(where)
    return RealResult(len(files), functions, kept, clean, failures, time.perf_counter() - started)


LANGUAGES = sorted(SOURCES)


@pytest.mark.parametrize("language", LANGUAGES)
def test_real_code_gives_pairs(language):
    result = real_result(language)
    print(
        f"{language}: {result.files} files, {len(result.functions)} documented functions, "
        f"{result.kept} kept, {result.seconds:.1f} s"
    )
    assert len(result.functions) > 0
    assert result.kept > 0


@pytest.mark.parametrize("language", LANGUAGES)
def test_real_code_no_comment_removes_every_comment(language):
    result = real_result(language)
    assert not result.failures["comment_left"], result.failures["comment_left"][:20]


@pytest.mark.parametrize("language", LANGUAGES)
def test_real_code_no_comment_adds_no_syntax_error_and_keeps_every_token(language):
    """Of the snippets that parse cleanly (wrapped as their grammar needs), at least 99.5 % still
    do without comments and keep every non-comment token in order."""
    result = real_result(language)
    broken = result.failures["new_error"] + result.failures["token_changed"]
    assert result.clean_snippets > 0
    assert len(broken) <= 0.005 * result.clean_snippets, (len(broken), result.clean_snippets, broken[:20])


@pytest.mark.parametrize("language", LANGUAGES)
def test_real_code_queries_are_text_without_comment_markers(language):
    result = real_result(language)
    assert not result.failures["query"], result.failures["query"][:20]
    for _, fn in result.functions[:200]:
        assert fn.query == " ".join(fn.query.split())  # one line
        assert fn.query.split()[0] in fn.docstring


def test_real_code_checks_have_teeth(monkeypatch):
    """With comment removal disabled, the checks report the comments left in the code."""
    files = [(f"hand.{language}", HAND[language].encode()) for language in ("go",)]
    assert not check_files("go", files).failures["comment_left"]
    monkeypatch.setattr("csbench.code.extract.remove_comments", lambda code, language: code)
    assert check_files("go", files).failures["comment_left"] == ["hand.go:11 Sum"]
