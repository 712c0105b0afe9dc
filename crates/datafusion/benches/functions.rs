//! The function-tracking benchmark under criterion: per function and vector size, one
//! evaluation of the call untracked, fully tracked and sampled adaptively at 1 % and 0.5 %.
//! `qprof bench functions` prints the same cases as tables, with the accuracy of the
//! estimates.

use std::hint::black_box;

use criterion::{BenchmarkId, Criterion, Throughput, criterion_group, criterion_main};
use qprof_datafusion::function_bench::{BenchFunction, BenchInput, Variant};

fn functions(c: &mut Criterion) {
    for function in BenchFunction::ALL {
        let mut group = c.benchmark_group(function.name());
        for rows in [100, 1_000, 10_000] {
            let input = BenchInput::new(function, rows);
            group.throughput(Throughput::Elements(rows as u64));
            for variant in Variant::ALL {
                // one call site per variant, kept across iterations as in a long query
                let (expr, _site) = input.expression(variant);
                group.bench_with_input(
                    BenchmarkId::new(variant.to_string(), rows),
                    &input,
                    |b, input| b.iter(|| black_box(input.evaluate(expr.as_ref()).unwrap())),
                );
            }
        }
        group.finish();
    }
}

criterion_group!(benches, functions);
criterion_main!(benches);
