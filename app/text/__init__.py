"""Text: lone surrogates (surrogates), line diffs (diff) and three-way merges (merge)."""
