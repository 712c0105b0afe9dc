//! What a profiled query leaves: its batches and profile, or its failure with the profile
//! so far.

use std::sync::Arc;

use datafusion::arrow::array::RecordBatch;
use datafusion::error::DataFusionError;
use datafusion::physical_plan::ExecutionPlan;
use qprof_core::profile::QueryProfile;

use crate::text::error_line;

/// Errors of running a profiled query.
#[derive(Debug, thiserror::Error)]
pub enum ProfileError {
    /// Planning or execution failed in DataFusion. Shown as the root cause on one line;
    /// DataFusion's wrapping layers (which repeat it) are not a `source`.
    #[error("{}", error_line(.0))]
    DataFusion(DataFusionError),
    /// A stream's batch failed; the error itself went to the stream's reader.
    #[error("{0}")]
    Stream(String),
}

impl From<DataFusionError> for ProfileError {
    fn from(err: DataFusionError) -> Self {
        ProfileError::DataFusion(err)
    }
}

/// A query's result and its profile.
#[derive(Debug)]
pub struct ProfiledQuery {
    /// The result batches.
    pub batches: Vec<RecordBatch>,
    /// The executed (wrapped) physical plan.
    pub plan: Arc<dyn ExecutionPlan>,
    /// The profile.
    pub profile: QueryProfile,
}

/// A query that failed, with what is known about it. Shown as its error.
#[derive(Debug, thiserror::Error)]
#[error("{error}")]
pub struct QueryFailure {
    /// Why it failed.
    pub error: ProfileError,
    /// The profile up to the failure, if the query was planned.
    pub profile: Option<Box<QueryProfile>>,
    /// When the query started, epoch ms.
    pub start_epoch_millis: u64,
}
