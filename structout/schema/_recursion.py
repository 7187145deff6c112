"""How deep the translator's recursive walks of *values* and *pattern text* may go.

Schemas are bounded by ``max_schema_depth`` (default 256, checked before translation). Values
checked against the IR (``Algebra.matches``), values re-ordered for the grammar's layout
(``Translation.dumps``) and ``format: regex`` pattern text are walked recursively too, a few Python
frames per level; this bound keeps them well inside Python's default recursion limit (1,000
frames) with room for the caller's frames. Deeper input is not an error of the schema: the check
answers "unsupported" (``matches``), leaves the value as it is (``dumps``) or refuses the pattern
(``regex_format_ok``).
"""

MAX_RECURSION_DEPTH = 200
