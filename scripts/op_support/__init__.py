"""The op-table measurement behind `scripts/measure_op_support.py`, one step per module:
`cases` (the single-op models), `prepare` (what the toolkit can be asked), `build` (one build
and its outcome), `table` (aggregating and writing); `common` holds what they share."""
