"""Reports for CI and people: a CSV of every candidate and a self-contained HTML page."""
