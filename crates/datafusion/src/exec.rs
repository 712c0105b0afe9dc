//! `ProfiledExec`: a transparent wrapper that measures one operator.
//!
//! The wrapper is invisible to planning: its children are the inner operator's children,
//! its properties are the inner operator's (the same `Arc`), downcasts see through it
//! (`downcast_delegate`), EXPLAIN prints the inner operator, and every method that returns
//! a new plan re-wraps the result with the same statistics, so the operator keeps its
//! identity through plan rewrites.

use std::any::Any;
use std::cell::Cell;
use std::fmt;
use std::mem::ManuallyDrop;
use std::pin::Pin;
use std::sync::Arc;
use std::sync::atomic::Ordering;
use std::task::{Context, Poll};

use datafusion::arrow::array::RecordBatch;
use datafusion::arrow::datatypes::SchemaRef;
use datafusion::common::tree_node::TreeNodeRecursion;
use datafusion::common::{Result, Statistics};
use datafusion::config::ConfigOptions;
use datafusion::datasource::physical_plan::FileScanConfig;
use datafusion::datasource::sink::DataSinkExec;
use datafusion::datasource::source::DataSourceExec;
use datafusion::execution::{RecordBatchStream, SendableRecordBatchStream, TaskContext};
use datafusion::physical_expr::{Distribution, OrderingRequirements, PhysicalSortExpr};
use datafusion::physical_plan::execution_plan::{CardinalityEffect, InvariantLevel};
use datafusion::physical_plan::filter_pushdown::{
    ChildPushdownResult, FilterDescription, FilterPushdownPhase, FilterPushdownPropagation,
};
use datafusion::physical_plan::metrics::MetricsSet;
use datafusion::physical_plan::projection::ProjectionExec;
use datafusion::physical_plan::sort_pushdown::SortOrderPushdownResult;
use datafusion::physical_plan::{
    ChildStats, ChildrenPropertiesMode, DisplayAs, DisplayFormatType, ExecutionPlan,
    InputDistributionRequirements, PhysicalExpr, PlanProperties, ReplaceChildrenOptions,
    StatisticsArgs,
};
use futures::{Stream, StreamExt};
use qprof_core::attribution;
use qprof_core::catalog::{self, Tally};
use qprof_core::clock::{ClockSource, SystemClock, epoch_micros};
use qprof_core::counters::OperatorTaskCounters;
use qprof_core::io::IoCounters;
use qprof_core::periodic::PeriodicUpdater;
use qprof_core::phases::JoinPhase;

use crate::consumer::ConsumerMeters;
use crate::counters::OperatorCounters;
use crate::io::process_updater;
use crate::text::error_line;

/// Wraps one operator of a plan and records its work per task.
pub struct ProfiledExec {
    inner: Arc<dyn ExecutionPlan>,
    counters: Arc<OperatorCounters>,
    /// For a file scan or a sink: the updater its tasks' I/O counters run on, created
    /// when a task starts (so the concurrency covers the whole task).
    io_updater: Option<Arc<PeriodicUpdater>>,
}

impl fmt::Debug for ProfiledExec {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("ProfiledExec")
            .field("node_id", &self.counters.node_id)
            .field("inner", &self.inner.name())
            .finish()
    }
}

impl ProfiledExec {
    pub(crate) fn new(inner: Arc<dyn ExecutionPlan>, counters: Arc<OperatorCounters>) -> Self {
        let io_updater = does_io(inner.as_ref()).then(process_updater);
        Self {
            inner,
            counters,
            io_updater,
        }
    }

    /// The wrapper itself, if `plan` is one. A raw `Any` check: DataFusion's own
    /// `downcast_ref` follows `downcast_delegate` and never sees the wrapper.
    pub fn of(plan: &dyn ExecutionPlan) -> Option<&ProfiledExec> {
        (plan as &dyn Any).downcast_ref::<ProfiledExec>()
    }

    /// The wrapped operator.
    pub fn inner(&self) -> &Arc<dyn ExecutionPlan> {
        &self.inner
    }

    /// Pre-order id of the operator in its plan.
    pub fn node_id(&self) -> usize {
        self.counters.node_id
    }

    pub(crate) fn counters(&self) -> &Arc<OperatorCounters> {
        &self.counters
    }

    /// From its next task on, measures how long the operator's consumer waits on it (the
    /// time from a poll that returned pending to the next poll: for a shuffle reader, its
    /// fetch wait) and counts it as `tally`, which every task then shows; the first call
    /// decides.
    pub fn measure_waits(&self, tally: Tally) {
        let _ = self.counters.waits_tally.set(tally);
    }

    /// From its next task on, measures the CPU time the operator's consumer spends between
    /// two of its batches on the thread that received the first: the work of a consumer
    /// no wrapper frames (a shuffle writer) that takes each batch up synchronously. Read
    /// with [`OperatorTaskCounters::consumer_cpu_nanos`].
    pub fn measure_consumer_cpu(&self) {
        self.counters
            .measures_consumer_cpu
            .store(true, Ordering::Relaxed);
    }

    /// The counters of each task executed so far, by partition.
    pub fn task_counters(&self) -> Vec<(usize, Arc<OperatorTaskCounters>)> {
        self.counters.executed_tasks()
    }

    fn rewrap(&self, inner: Arc<dyn ExecutionPlan>) -> Arc<dyn ExecutionPlan> {
        Arc::new(ProfiledExec::new(inner, Arc::clone(&self.counters)))
    }
}

/// Whether `plan` reads files or writes them: its tasks get I/O counters from their start.
fn does_io(plan: &dyn ExecutionPlan) -> bool {
    if plan.downcast_ref::<DataSinkExec>().is_some() {
        return true;
    }
    plan.downcast_ref::<DataSourceExec>()
        .is_some_and(|scan| scan.data_source().is::<FileScanConfig>())
}

impl DisplayAs for ProfiledExec {
    fn fmt_as(&self, t: DisplayFormatType, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        self.inner.fmt_as(t, f)
    }
}

impl ExecutionPlan for ProfiledExec {
    fn name(&self) -> &str {
        self.inner.name()
    }

    fn downcast_delegate(&self) -> Option<&dyn ExecutionPlan> {
        Some(self.inner.as_ref())
    }

    fn schema(&self) -> SchemaRef {
        self.inner.schema()
    }

    fn properties(&self) -> &Arc<PlanProperties> {
        // the same Arc: parents keep the `ChildrenPropertiesMode::Keep` fast path
        self.inner.properties()
    }

    fn check_invariants(&self, check: InvariantLevel) -> Result<()> {
        self.inner.check_invariants(check)
    }

    fn dynamic_expressions_produced(&self) -> Vec<Arc<dyn PhysicalExpr>> {
        self.inner.dynamic_expressions_produced()
    }

    #[allow(deprecated)]
    fn required_input_distribution(&self) -> Vec<Distribution> {
        self.inner.required_input_distribution()
    }

    fn input_distribution_requirements(&self) -> InputDistributionRequirements {
        self.inner.input_distribution_requirements()
    }

    fn required_input_ordering(&self) -> Vec<Option<OrderingRequirements>> {
        self.inner.required_input_ordering()
    }

    fn maintains_input_order(&self) -> Vec<bool> {
        self.inner.maintains_input_order()
    }

    fn benefits_from_input_partitioning(&self) -> Vec<bool> {
        self.inner.benefits_from_input_partitioning()
    }

    fn children(&self) -> Vec<&Arc<dyn ExecutionPlan>> {
        self.inner.children()
    }

    /// Must delegate: a hash join only builds its dynamic filter when it finds the filter's
    /// consumer in its probe subtree through `apply_expressions`.
    fn apply_expressions(
        &self,
        f: &mut dyn FnMut(&Arc<dyn PhysicalExpr>) -> Result<TreeNodeRecursion>,
    ) -> Result<TreeNodeRecursion> {
        self.inner.apply_expressions(f)
    }

    fn replace_children(
        self: Arc<Self>,
        children: Vec<Arc<dyn ExecutionPlan>>,
        options: ReplaceChildrenOptions,
    ) -> Result<Arc<dyn ExecutionPlan>> {
        let inner = Arc::clone(&self.inner).replace_children(children, options)?;
        Ok(self.rewrap(inner))
    }

    fn with_new_children(
        self: Arc<Self>,
        children: Vec<Arc<dyn ExecutionPlan>>,
    ) -> Result<Arc<dyn ExecutionPlan>> {
        self.replace_children(
            children,
            ReplaceChildrenOptions::new(ChildrenPropertiesMode::Recompute),
        )
    }

    #[allow(deprecated)]
    fn with_new_children_and_same_properties(
        self: Arc<Self>,
        children: Vec<Arc<dyn ExecutionPlan>>,
    ) -> Result<Arc<dyn ExecutionPlan>> {
        self.replace_children(
            children,
            ReplaceChildrenOptions::new(ChildrenPropertiesMode::Keep),
        )
    }

    fn reset_state(self: Arc<Self>) -> Result<Arc<dyn ExecutionPlan>> {
        let inner = Arc::clone(&self.inner).reset_state()?;
        Ok(self.rewrap(inner))
    }

    fn repartitioned(
        &self,
        target_partitions: usize,
        config: &ConfigOptions,
    ) -> Result<Option<Arc<dyn ExecutionPlan>>> {
        Ok(self
            .inner
            .repartitioned(target_partitions, config)?
            .map(|p| self.rewrap(p)))
    }

    fn execute(
        &self,
        partition: usize,
        context: Arc<TaskContext>,
    ) -> Result<SendableRecordBatchStream> {
        let task = self.counters.task(partition);
        task.record_start(epoch_micros());
        // an input of a join is executed by the join's task, inside its frame
        let feeds = self.counters.join_input.get().and_then(|side| {
            let join = attribution::current().filter(|t| t.phases().is_some())?;
            Some(JoinFeed { join, side: *side })
        });
        if let Some(updater) = &self.io_updater {
            task.io_or_init(|| IoCounters::new(updater));
            self.counters.runtime.get_or_init(|| context.runtime_env());
        }
        let inner = {
            // operators register memory consumers and spawn input tasks here: the frame
            // attributes both to this task
            let _frame = attribution::enter(&SystemClock, &task);
            self.inner.execute(partition, context)?
        };
        let waits = self.counters.waits_tally.get().copied();
        if let Some(tally) = waits {
            task.tally(tally, 0);
        }
        let meters = ConsumerMeters::new(
            waits,
            self.counters.measures_consumer_cpu.load(Ordering::Relaxed),
        );
        Ok(Box::pin(ProfiledStream {
            inner: ManuallyDrop::new(inner),
            task,
            feeds,
            meters,
            has_input: !self.inner.children().is_empty(),
            pending_since: None,
        }))
    }

    /// The inner operator's metrics, unchanged: qprof's own metrics are read from the
    /// wrapper directly, so EXPLAIN ANALYZE output stays exactly DataFusion's.
    fn metrics(&self) -> Option<MetricsSet> {
        self.inner.metrics()
    }

    #[allow(deprecated)]
    fn partition_statistics(&self, partition: Option<usize>) -> Result<Arc<Statistics>> {
        self.inner.partition_statistics(partition)
    }

    fn statistics_from_inputs(
        &self,
        input_stats: &[Arc<Statistics>],
        args: &StatisticsArgs,
    ) -> Result<Arc<Statistics>> {
        self.inner.statistics_from_inputs(input_stats, args)
    }

    fn child_stats_requests(&self, partition: Option<usize>) -> Vec<ChildStats> {
        self.inner.child_stats_requests(partition)
    }

    fn supports_limit_pushdown(&self) -> bool {
        self.inner.supports_limit_pushdown()
    }

    fn with_fetch(&self, limit: Option<usize>) -> Option<Arc<dyn ExecutionPlan>> {
        self.inner.with_fetch(limit).map(|p| self.rewrap(p))
    }

    fn fetch(&self) -> Option<usize> {
        self.inner.fetch()
    }

    fn cardinality_effect(&self) -> CardinalityEffect {
        self.inner.cardinality_effect()
    }

    fn try_swapping_with_projection(
        &self,
        projection: &ProjectionExec,
    ) -> Result<Option<Arc<dyn ExecutionPlan>>> {
        Ok(self
            .inner
            .try_swapping_with_projection(projection)?
            .map(|p| self.rewrap(p)))
    }

    fn gather_filters_for_pushdown(
        &self,
        phase: FilterPushdownPhase,
        parent_filters: Vec<Arc<dyn PhysicalExpr>>,
        config: &ConfigOptions,
    ) -> Result<FilterDescription> {
        self.inner
            .gather_filters_for_pushdown(phase, parent_filters, config)
    }

    fn handle_child_pushdown_result(
        &self,
        phase: FilterPushdownPhase,
        child_pushdown_result: ChildPushdownResult,
        config: &ConfigOptions,
    ) -> Result<FilterPushdownPropagation<Arc<dyn ExecutionPlan>>> {
        let FilterPushdownPropagation {
            filters,
            updated_node,
        } = self
            .inner
            .handle_child_pushdown_result(phase, child_pushdown_result, config)?;
        Ok(FilterPushdownPropagation {
            filters,
            updated_node: updated_node.map(|n| self.rewrap(n)),
        })
    }

    fn with_new_state(&self, state: Arc<dyn Any + Send + Sync>) -> Option<Arc<dyn ExecutionPlan>> {
        self.inner.with_new_state(state).map(|p| self.rewrap(p))
    }

    fn try_pushdown_sort(
        &self,
        order: &[PhysicalSortExpr],
    ) -> Result<SortOrderPushdownResult<Arc<dyn ExecutionPlan>>> {
        Ok(match self.inner.try_pushdown_sort(order)? {
            SortOrderPushdownResult::Exact { inner } => SortOrderPushdownResult::Exact {
                inner: self.rewrap(inner),
            },
            SortOrderPushdownResult::Inexact { inner } => SortOrderPushdownResult::Inexact {
                inner: self.rewrap(inner),
            },
            SortOrderPushdownResult::Unsupported => SortOrderPushdownResult::Unsupported,
        })
    }

    fn with_preserve_order(&self, preserve_order: bool) -> Option<Arc<dyn ExecutionPlan>> {
        self.inner
            .with_preserve_order(preserve_order)
            .map(|p| self.rewrap(p))
    }
}

/// The join task an input's stream feeds, and on which side.
struct JoinFeed {
    join: Arc<OperatorTaskCounters>,
    side: JoinPhase,
}

const PENDING_POLLS: Tally = Tally::of(&catalog::PENDING_POLLS);
const INPUT_WAIT: Tally = Tally::of(&catalog::INPUT_WAIT_NANOS);

/// What the last poll of a wrapped stream on a thread returned.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum InputPoll {
    /// No wrapped stream was polled.
    None,
    /// It had no batch ready.
    Pending,
    /// It gave a batch.
    Batch,
    /// It ended (or failed).
    Ended,
}

thread_local! {
    /// What the last poll of a wrapped stream on this thread returned, since it was last
    /// reset: a spawned producer that returned pending right after its input gave it a
    /// batch is blocked on its output.
    static LAST_INPUT_POLL: Cell<InputPoll> = const { Cell::new(InputPoll::None) };
}

/// Runs `poll` and tells what the last wrapped stream polled inside it returned.
pub(crate) fn noting_input_polls<R>(poll: impl FnOnce() -> R) -> (R, InputPoll) {
    let outer = LAST_INPUT_POLL.with(|f| f.replace(InputPoll::None));
    let result = poll();
    let inner = LAST_INPUT_POLL.with(|f| f.get());
    let seen = if inner == InputPoll::None {
        outer
    } else {
        inner
    };
    LAST_INPUT_POLL.with(|f| f.set(seen));
    (result, inner)
}

/// The output stream of one task of a profiled operator.
struct ProfiledStream {
    /// Dropped in `Drop`, inside a frame: tearing down an operator is its own work.
    inner: ManuallyDrop<SendableRecordBatchStream>,
    task: Arc<OperatorTaskCounters>,
    feeds: Option<JoinFeed>,
    /// What it measures of its consumer, where asked to.
    meters: Option<ConsumerMeters>,
    /// Whether the operator has inputs: its pending polls wait on them.
    has_input: bool,
    /// When its last poll returned pending, if it has inputs (clock ticks).
    pending_since: Option<u64>,
}

/// Tells the stack sampler where the engine enters an operator's code through a wrapper
/// of this file (a stream's poll, an operator's `execute`): its walks stop there.
pub(crate) fn register_operator_entries() {
    type PollNext =
        fn(Pin<&mut ProfiledStream>, &mut Context<'_>) -> Poll<Option<Result<RecordBatch>>>;
    type Execute = fn(&ProfiledExec, usize, Arc<TaskContext>) -> Result<SendableRecordBatchStream>;
    let poll_next: PollNext = <ProfiledStream as Stream>::poll_next;
    let execute: Execute = <ProfiledExec as ExecutionPlan>::execute;
    qprof_core::stacks::register_operator_entry(poll_next as usize);
    qprof_core::stacks::register_operator_entry(execute as usize);
}

/// The task's output ended or was dropped: it finishes, and its periodic counters stop.
fn finish(task: &OperatorTaskCounters) {
    task.record_finish(epoch_micros());
    if let Some(io) = task.io() {
        io.stop();
    }
}

impl Drop for ProfiledStream {
    fn drop(&mut self) {
        // a stream dropped before its end (e.g. under a limit) finishes here
        finish(&self.task);
        let _frame = attribution::enter(&SystemClock, &self.task);
        // SAFETY: `inner` is dropped exactly once, here, and never used afterwards.
        unsafe { ManuallyDrop::drop(&mut self.inner) };
    }
}

impl Stream for ProfiledStream {
    type Item = Result<RecordBatch>;

    fn poll_next(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Option<Self::Item>> {
        let this = &mut *self;
        this.task.record_poll();
        if let Some(since) = this.pending_since.take() {
            let waited = SystemClock.now_ticks().saturating_sub(since);
            this.task
                .tally(INPUT_WAIT, SystemClock.ticks_to_nanos(waited));
        }
        if let Some(meters) = &mut this.meters {
            meters.poll_started(&SystemClock, &this.task);
        }
        let io = this.task.io();
        if let Some(io) = io {
            io.poll_started(io.now_nanos());
        }
        let frame = attribution::enter(&SystemClock, &this.task);
        if let Some(feed) = &this.feeds
            && feed.side == JoinPhase::Probe
            && let Some(phases) = feed.join.phases()
        {
            // the join's own time up to here was closed when this frame opened
            phases.probe_polled(feed.join.memory().current());
        }
        let polled = this.inner.poll_next_unpin(cx);
        drop(frame);
        if let (Some(io), Poll::Pending) = (io, &polled) {
            io.poll_pending(io.now_nanos());
        }
        match &polled {
            Poll::Ready(Some(Ok(batch))) => {
                // Arrow's buffer sizes: no allocation, unlike DataFusion's de-duplicating count
                this.task
                    .record_batch(batch.num_rows(), batch.get_array_memory_size());
                if let Some(feed) = &this.feeds
                    && let Some(phases) = feed.join.phases()
                {
                    phases.record_input(feed.side, batch.num_rows());
                }
            }
            Poll::Ready(Some(Err(e))) => this.task.record_error(|| error_line(e)),
            Poll::Ready(None) => finish(&this.task),
            Poll::Pending => {
                this.task.tally(PENDING_POLLS, 1);
                if this.has_input {
                    this.pending_since = Some(SystemClock.now_ticks());
                }
            }
        }
        LAST_INPUT_POLL.with(|f| {
            f.set(match &polled {
                Poll::Pending => InputPoll::Pending,
                Poll::Ready(Some(Ok(_))) => InputPoll::Batch,
                Poll::Ready(_) => InputPoll::Ended,
            })
        });
        // last: what follows is the consumer's
        if let Some(meters) = &mut this.meters {
            meters.polled(&SystemClock, &polled);
        }
        polled
    }

    fn size_hint(&self) -> (usize, Option<usize>) {
        self.inner.size_hint()
    }
}

impl RecordBatchStream for ProfiledStream {
    fn schema(&self) -> SchemaRef {
        self.inner.schema()
    }
}
