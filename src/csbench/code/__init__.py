"""Source code analysis with tree-sitter: parsing, function extraction, comment removal."""
