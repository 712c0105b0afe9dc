//! The scheduler's port: Ballista's gRPC service for executors and clients, its health
//! probes, and beside them HTTP routes of qprof's own (the profiles of a client's jobs),
//! so that a client reaches everything at the one `df://` address it knows.
//!
//! Ballista's `start_grpc_service_with_listener` takes no routes of anyone else's; this
//! serves what it serves with the features qprof builds Ballista with (no REST API, no
//! Flight SQL), each connection's peer address included (Ballista's handlers take an
//! executor that gives no host of its own by it). A scheduler configured with the
//! embedded Flight proxy is served by Ballista's own function instead.

use std::sync::Arc;

use axum::Router;
use axum::extract::State;
use axum::http::StatusCode;
use axum::response::IntoResponse;
use axum::routing::get;
use ballista_core::serde::protobuf::scheduler_grpc_server::SchedulerGrpcServer;
use ballista_scheduler::config::SchedulerConfig;
use ballista_scheduler::scheduler_server::SchedulerServer;
use datafusion_proto::protobuf::{LogicalPlanNode, PhysicalPlanNode};

use crate::cluster::ClusterError;

/// The scheduler Ballista builds with qprof's codecs.
pub(crate) type Scheduler = SchedulerServer<LogicalPlanNode, PhysicalPlanNode>;

/// Serves `scheduler` (configured by `config`, its executors' ids in `executors`) and
/// `routes` on `listener` until it fails.
pub(crate) async fn serve(
    listener: tokio::net::TcpListener,
    scheduler: Scheduler,
    config: &SchedulerConfig,
    executors: tokio::sync::watch::Receiver<Vec<String>>,
    routes: Router,
) -> Result<(), ClusterError> {
    let health = Router::new()
        .route("/healthz", get(|| async { "ok" }))
        .route("/readyz", get(readyz))
        .with_state(Arc::new((scheduler.clone(), executors)));
    let grpc = SchedulerGrpcServer::new(scheduler)
        .max_encoding_message_size(config.grpc_server_max_encoding_message_size as usize)
        .max_decoding_message_size(config.grpc_server_max_decoding_message_size as usize);
    let mut services = tonic::service::RoutesBuilder::default();
    services.add_service(grpc);
    let app = services
        .routes()
        .into_axum_router()
        .merge(health)
        .merge(routes)
        .fallback(|| async { (StatusCode::NOT_FOUND, "no such route\n") });
    axum::serve(
        listener,
        app.into_make_service_with_connect_info::<std::net::SocketAddr>(),
    )
    .await?;
    Ok(())
}

/// Ready once the executors Ballista's configuration asks for have registered; says how
/// many have, in the words of Ballista's own probe.
async fn readyz(
    State(state): State<Arc<(Scheduler, tokio::sync::watch::Receiver<Vec<String>>)>>,
) -> impl IntoResponse {
    let (scheduler, executors) = state.as_ref();
    let registered = executors.borrow().len();
    if scheduler.is_ready() {
        (
            StatusCode::OK,
            format!("ready: {registered} executors registered\n"),
        )
    } else {
        let required = scheduler.state.config.min_ready_executors;
        (
            StatusCode::SERVICE_UNAVAILABLE,
            format!("not ready: {registered}/{required} executors registered\n"),
        )
    }
}
