//! The data the examples run on, made in memory: a `sales` table of 200,000 rows and a
//! `regions` table of 8, so that every example runs without arguments or files.

use std::sync::Arc;

use datafusion::arrow::array::{Float64Array, Int64Array, RecordBatch, StringArray};
use datafusion::arrow::datatypes::{DataType, Field, Schema};
use datafusion::datasource::MemTable;
use datafusion::error::Result;
use datafusion::prelude::SessionContext;

/// Rows of the `sales` table.
pub const SALES_ROWS: i64 = 200_000;

/// Region names, one row each in `regions`.
pub const REGIONS: [&str; 8] = [
    "north", "south", "east", "west", "centre", "coast", "hills", "islands",
];

/// Registers `sales(id, region_id, customer, amount)` in four batches of 50,000 rows and
/// `regions(region_id, name)` in `ctx`.
///
/// # Errors
/// If a table cannot be registered.
pub fn register_tables(ctx: &SessionContext) -> Result<()> {
    let sales = Arc::new(Schema::new(vec![
        Field::new("id", DataType::Int64, false),
        Field::new("region_id", DataType::Int64, false),
        Field::new("customer", DataType::Utf8, false),
        Field::new("amount", DataType::Float64, false),
    ]));
    let batches = (0..4)
        .map(|b| {
            let ids: Vec<i64> = (b * SALES_ROWS / 4..(b + 1) * SALES_ROWS / 4).collect();
            let region: Int64Array = ids.iter().map(|i| i * 7 % 8).collect();
            let customer: StringArray = ids
                .iter()
                .map(|i| Some(format!("customer-{:05}", i * 7919 % 20_000)))
                .collect();
            let amount: Float64Array = ids.iter().map(|i| (i * 31 % 1000) as f64 / 10.0).collect();
            RecordBatch::try_new(
                Arc::clone(&sales),
                vec![
                    Arc::new(Int64Array::from(ids)),
                    Arc::new(region),
                    Arc::new(customer),
                    Arc::new(amount),
                ],
            )
        })
        .collect::<std::result::Result<Vec<_>, _>>()?;
    let sales_table = MemTable::try_new(Arc::clone(&sales), vec![batches])?;
    ctx.register_table("sales", Arc::new(sales_table))?;

    let regions = Arc::new(Schema::new(vec![
        Field::new("region_id", DataType::Int64, false),
        Field::new("name", DataType::Utf8, false),
    ]));
    let batch = RecordBatch::try_new(
        Arc::clone(&regions),
        vec![
            Arc::new(Int64Array::from_iter_values(0..REGIONS.len() as i64)),
            Arc::new(StringArray::from_iter_values(REGIONS)),
        ],
    )?;
    ctx.register_table(
        "regions",
        Arc::new(MemTable::try_new(regions, vec![vec![batch]])?),
    )?;
    Ok(())
}

/// Revenue per region, the examples' query: a join, an aggregation and a sort.
pub const REVENUE_BY_REGION: &str = "\
SELECT r.name, count(*) AS orders, sum(s.amount) AS revenue, count(DISTINCT s.customer) AS customers
FROM sales s JOIN regions r ON s.region_id = r.region_id
WHERE s.amount > 10
GROUP BY r.name
ORDER BY revenue DESC";
