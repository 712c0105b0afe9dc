//! A profiled query's batches as a stream, whose end (or drop) ends the query.

use std::pin::Pin;
use std::sync::Arc;
use std::task::{Context, Poll};

use datafusion::arrow::array::RecordBatch;
use datafusion::arrow::datatypes::SchemaRef;
use datafusion::execution::{RecordBatchStream, SendableRecordBatchStream};
use datafusion::physical_plan::ExecutionPlan;
use futures::Stream;
use qprof_core::profile::QueryProfile;

use super::queries::Started;
use super::{ProfileError, Profiler};
use crate::text::error_line;

/// The batches of a query started with [`Profiler::execute_stream`]. When it ends (or
/// fails, or is dropped first), the profile is taken and the query's end posted.
pub struct QueryStream {
    pub(super) inner: SendableRecordBatchStream,
    pub(super) plan: Arc<dyn ExecutionPlan>,
    pub(super) started: Option<Started>,
    pub(super) rows: u64,
    pub(super) profiler: Profiler,
    pub(super) profile: Option<QueryProfile>,
}

impl std::fmt::Debug for QueryStream {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("QueryStream")
            .field("rows", &self.rows)
            .field("ended", &self.started.is_none())
            .finish_non_exhaustive()
    }
}

impl QueryStream {
    /// The executed plan.
    pub fn plan(&self) -> &Arc<dyn ExecutionPlan> {
        &self.plan
    }

    /// The profile, once the stream ended.
    pub fn profile(&self) -> Option<&QueryProfile> {
        self.profile.as_ref()
    }

    fn finish(&mut self, error: Option<ProfileError>) {
        if let Some(started) = self.started.take() {
            self.profile = self
                .profiler
                .end(started, Some(&self.plan), self.rows, error)
                .profile;
        }
    }
}

impl Stream for QueryStream {
    type Item = datafusion::error::Result<RecordBatch>;

    fn poll_next(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Option<Self::Item>> {
        let this = &mut *self;
        if this.started.is_none() {
            return Poll::Ready(None);
        }
        let next = this.inner.as_mut().poll_next(cx);
        match &next {
            Poll::Ready(Some(Ok(batch))) => this.rows += batch.num_rows() as u64,
            Poll::Ready(Some(Err(e))) => this.finish(Some(ProfileError::Stream(error_line(e)))),
            Poll::Ready(None) => this.finish(None),
            Poll::Pending => {}
        }
        next
    }
}

impl RecordBatchStream for QueryStream {
    fn schema(&self) -> SchemaRef {
        self.inner.schema()
    }
}

impl Drop for QueryStream {
    fn drop(&mut self) {
        self.finish(Some(ProfileError::Stream(
            "cancelled: the stream was dropped before its end".to_string(),
        )));
    }
}
