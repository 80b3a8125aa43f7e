"""What the seeded generators of every app (apps/*/generator*.py) have in common.

columns: rows as equal-length numpy columns, and block counters for ids and labels;
arrival: a step's emit-or-carry cut in arrival order; faults: the fault codes, drawing
which rows to break, duplicates, and byte corruptions every record format shares;
json_text: column-wise JSON text with Arrow; truth: chunks, labels and the truth files.
None of it knows an app's columns or record schema.
"""
