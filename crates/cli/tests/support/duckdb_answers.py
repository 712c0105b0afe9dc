"""TPC-H answers from DuckDB, an engine independent of DataFusion, for comparison.

Usage: duckdb_answers.py DATA_DIR QUERY_DIR
Reads the eight tables' Parquet files in DATA_DIR, runs q1.sql .. q22.sql of QUERY_DIR,
and prints one JSON object: query number -> rows, each a list of cells as text (numbers
with all their digits, dates as YYYY-MM-DD, NULL as null).
"""

import datetime
import decimal
import json
import pathlib
import sys

import duckdb

TABLES = ["customer", "lineitem", "nation", "orders", "part", "partsupp", "region", "supplier"]


def cell(value):
    if value is None:
        return None
    if isinstance(value, (datetime.date, datetime.datetime)):
        return value.isoformat()
    if isinstance(value, (float, decimal.Decimal)):
        return repr(float(value)) if isinstance(value, float) else str(value)
    return str(value)


def main():
    data, queries = pathlib.Path(sys.argv[1]), pathlib.Path(sys.argv[2])
    con = duckdb.connect()
    for table in TABLES:
        con.execute(f"CREATE VIEW {table} AS SELECT * FROM read_parquet('{data / (table + '.parquet')}')")
    answers = {}
    for n in range(1, 23):
        sql = (queries / f"q{n}.sql").read_text()
        rows = con.execute(sql).fetchall()
        answers[str(n)] = [[cell(v) for v in row] for row in rows]
    json.dump(answers, sys.stdout)


main()
