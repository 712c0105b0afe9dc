//! The scheduler's job state and cluster state, each wrapped so that the
//! [`ClusterObserver`] sees what passes through, unchanged.

use std::collections::{HashMap, HashSet};
use std::fmt;
use std::sync::Arc;

use ballista_core::JobId;
use ballista_core::JobStatusSubscriber;
use ballista_core::error::Result;
use ballista_core::serde::protobuf::ExecutorHeartbeat;
use ballista_core::serde::scheduler::{ExecutorData, ExecutorMetadata};
use ballista_scheduler::cluster::{
    BoundTask, ClusterState, ClusterStateEventStream, ExecutorSlot, JobState, JobStateEventStream,
};
use ballista_scheduler::config::TaskDistributionPolicy;
use ballista_scheduler::state::execution_graph::ExecutionGraphBox;
use ballista_scheduler::state::task_manager::JobInfoCache;
use datafusion::prelude::{SessionConfig, SessionContext};

use super::ClusterObserver;

/// The scheduler's job state, observed.
pub struct ObservedJobState {
    pub(super) inner: Arc<dyn JobState>,
    pub(super) observer: Arc<ClusterObserver>,
}

impl fmt::Debug for ObservedJobState {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("ObservedJobState")
            .field("observer", &self.observer)
            .finish_non_exhaustive()
    }
}

#[async_trait::async_trait]
impl JobState for ObservedJobState {
    fn accept_job(&self, job_id: &JobId, job_name: &str, queued_at: u64) -> Result<()> {
        self.inner.accept_job(job_id, job_name, queued_at)?;
        self.observer.job_accepted(job_id, job_name, queued_at);
        Ok(())
    }

    fn pending_job_number(&self) -> usize {
        self.inner.pending_job_number()
    }

    async fn submit_job(
        &self,
        job_id: JobId,
        graph: &ExecutionGraphBox,
        subscriber: Option<JobStatusSubscriber>,
    ) -> Result<()> {
        self.observer.job_submitted(&job_id, graph);
        let submitted = self
            .inner
            .submit_job(job_id.clone(), graph, subscriber)
            .await;
        if submitted.is_err() {
            // it will never end: its client is not kept waiting for its profile
            self.observer.job_not_submitted(&job_id);
        }
        submitted
    }

    async fn get_jobs(&self) -> Result<HashSet<JobId>> {
        self.inner.get_jobs().await
    }

    async fn get_all_jobs(&self) -> Result<HashSet<JobId>> {
        self.inner.get_all_jobs().await
    }

    async fn get_job_status(
        &self,
        job_id: &JobId,
    ) -> Result<Option<ballista_core::serde::protobuf::JobStatus>> {
        self.inner.get_job_status(job_id).await
    }

    async fn get_execution_graph(&self, job_id: &JobId) -> Result<Option<ExecutionGraphBox>> {
        self.inner.get_execution_graph(job_id).await
    }

    async fn save_job(&self, job_id: &JobId, graph: &ExecutionGraphBox) -> Result<()> {
        if let Some(failed) = self.observer.saved_outcome(job_id, graph) {
            self.observer.job_saved(job_id, &failed);
            return self.inner.save_job(job_id, &failed).await;
        }
        self.observer.job_saved(job_id, graph);
        self.inner.save_job(job_id, graph).await
    }

    async fn fail_unscheduled_job(&self, job_id: &JobId, reason: String) -> Result<()> {
        self.inner.fail_unscheduled_job(job_id, reason).await
    }

    async fn remove_job(&self, job_id: &JobId) -> Result<()> {
        self.inner.remove_job(job_id).await
    }

    async fn try_acquire_job(&self, job_id: &JobId) -> Result<Option<ExecutionGraphBox>> {
        self.inner.try_acquire_job(job_id).await
    }

    async fn job_state_events(&self) -> Result<JobStateEventStream> {
        self.inner.job_state_events().await
    }

    async fn create_or_update_session(
        &self,
        session_id: &str,
        config: &SessionConfig,
    ) -> Result<Arc<SessionContext>> {
        let context = self
            .inner
            .create_or_update_session(session_id, config)
            .await?;
        self.observer.session_created(session_id, &context);
        Ok(context)
    }

    async fn remove_session(&self, session_id: &str) -> Result<()> {
        self.observer.end_session(session_id);
        // the session's log is complete when its client hears back
        self.observer.flushed().await;
        self.inner.remove_session(session_id).await
    }

    fn produce_config(&self) -> SessionConfig {
        self.inner.produce_config()
    }
}

/// The scheduler's cluster state, observed.
pub struct ObservedClusterState {
    pub(super) inner: Arc<dyn ClusterState>,
    pub(super) observer: Arc<ClusterObserver>,
}

impl fmt::Debug for ObservedClusterState {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("ObservedClusterState")
            .field("observer", &self.observer)
            .finish_non_exhaustive()
    }
}

#[async_trait::async_trait]
impl ClusterState for ObservedClusterState {
    async fn init(&self) -> Result<()> {
        self.inner.init().await
    }

    async fn bind_schedulable_tasks(
        &self,
        distribution: TaskDistributionPolicy,
        active_jobs: Arc<HashMap<JobId, JobInfoCache>>,
        executors: Option<HashSet<String>>,
    ) -> Result<Vec<BoundTask>> {
        let bound = self
            .inner
            .bind_schedulable_tasks(distribution, active_jobs, executors)
            .await?;
        self.observer.tasks_bound(&bound);
        Ok(bound)
    }

    async fn unbind_tasks(&self, executor_slots: Vec<ExecutorSlot>) -> Result<()> {
        self.observer.slots_unbound(&executor_slots);
        self.inner.unbind_tasks(executor_slots).await
    }

    async fn register_executor(
        &self,
        metadata: ExecutorMetadata,
        spec: ExecutorData,
    ) -> Result<()> {
        // heard once Ballista took it (it refuses an id it has)
        let (id, data) = (metadata.clone(), spec.clone());
        self.inner.register_executor(metadata, spec).await?;
        self.observer.executor_registered(&id, &data);
        Ok(())
    }

    async fn save_executor_metadata(&self, metadata: ExecutorMetadata) -> Result<()> {
        self.inner.save_executor_metadata(metadata).await
    }

    async fn get_executor_metadata(&self, executor_id: &str) -> Result<ExecutorMetadata> {
        self.inner.get_executor_metadata(executor_id).await
    }

    async fn registered_executor_metadata(&self) -> Vec<ExecutorMetadata> {
        self.inner.registered_executor_metadata().await
    }

    async fn save_executor_heartbeat(&self, heartbeat: ExecutorHeartbeat) -> Result<()> {
        self.observer.heartbeat(&heartbeat);
        self.inner.save_executor_heartbeat(heartbeat).await
    }

    async fn remove_executor(&self, executor_id: &str) -> Result<()> {
        self.observer.executor_removed(executor_id);
        self.inner.remove_executor(executor_id).await
    }

    fn executor_heartbeats(&self) -> HashMap<String, ExecutorHeartbeat> {
        self.inner.executor_heartbeats()
    }

    fn get_executor_heartbeat(&self, executor_id: &str) -> Option<ExecutorHeartbeat> {
        self.inner.get_executor_heartbeat(executor_id)
    }

    async fn cluster_state_events(&self) -> Result<ClusterStateEventStream> {
        self.inner.cluster_state_events().await
    }
}
