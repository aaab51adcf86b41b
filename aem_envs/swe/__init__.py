"""SWE-bench-style repository tasks in a sandbox, graded with swebench's own code."""
