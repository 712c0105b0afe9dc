//! An object store for tests: the local file system behind a store that counts what it
//! serves and can make every read take a fixed time, or hold each read until the test lets
//! it through.

use std::fmt;
use std::ops::Range;
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering::Relaxed};
use std::time::Duration;

use async_trait::async_trait;
use bytes::Bytes;
use datafusion::object_store::local::LocalFileSystem;
use datafusion::object_store::path::Path;
use datafusion::object_store::{
    CopyOptions, GetOptions, GetResult, ListResult, MultipartUpload, ObjectMeta, ObjectStore,
    PutMultipartOptions, PutOptions, PutPayload, PutResult, Result,
};
use futures::stream::BoxStream;

/// A store in front of the local file system that counts what it serves and can make
/// every read take a fixed time, or hold each read until the test lets it through.
#[derive(Debug)]
pub(crate) struct CountingStore {
    inner: LocalFileSystem,
    read_delay: Duration,
    /// When closed, each read waits for a permit the test hands out.
    pub(crate) gate: Option<tokio::sync::Semaphore>,
    /// Reads waiting at the gate now.
    pub(crate) held: AtomicU64,
    /// Reads served.
    pub(crate) reads: AtomicU64,
    /// Bytes served.
    pub(crate) bytes: AtomicU64,
}

// each test that includes this module uses a part of it
#[allow(dead_code)]
impl CountingStore {
    /// A store whose every read takes `read_delay` (none for zero).
    pub(crate) fn new(read_delay: Duration) -> Arc<Self> {
        Arc::new(Self {
            inner: LocalFileSystem::new(),
            read_delay,
            gate: None,
            held: AtomicU64::new(0),
            reads: AtomicU64::new(0),
            bytes: AtomicU64::new(0),
        })
    }

    /// A store whose reads wait at a gate the test opens (see [`Self::let_through`]).
    pub(crate) fn gated() -> Arc<Self> {
        Arc::new(Self {
            gate: Some(tokio::sync::Semaphore::new(0)),
            ..Arc::into_inner(Self::new(Duration::ZERO)).unwrap()
        })
    }

    /// Lets `reads` more reads through the gate.
    pub(crate) fn let_through(&self, reads: usize) {
        if let Some(gate) = &self.gate {
            gate.add_permits(reads);
        }
    }

    /// Forgets the reads served so far.
    pub(crate) fn reset(&self) {
        self.reads.store(0, Relaxed);
        self.bytes.store(0, Relaxed);
    }

    async fn delay(&self) {
        if let Some(gate) = &self.gate {
            self.held.fetch_add(1, Relaxed);
            if let Ok(permit) = gate.acquire().await {
                permit.forget();
            }
            self.held.fetch_sub(1, Relaxed);
        }
        if !self.read_delay.is_zero() {
            tokio::time::sleep(self.read_delay).await;
        }
    }
}

impl fmt::Display for CountingStore {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "CountingStore({})", self.inner)
    }
}

#[async_trait]
impl ObjectStore for CountingStore {
    async fn put_opts(&self, l: &Path, p: PutPayload, o: PutOptions) -> Result<PutResult> {
        self.inner.put_opts(l, p, o).await
    }

    async fn put_multipart_opts(
        &self,
        l: &Path,
        o: PutMultipartOptions,
    ) -> Result<Box<dyn MultipartUpload>> {
        self.inner.put_multipart_opts(l, o).await
    }

    async fn get_opts(&self, l: &Path, options: GetOptions) -> Result<GetResult> {
        let head = options.head;
        let result = self.inner.get_opts(l, options).await?;
        if !head {
            self.delay().await;
            self.reads.fetch_add(1, Relaxed);
            self.bytes
                .fetch_add(result.range.end - result.range.start, Relaxed);
        }
        Ok(result)
    }

    async fn get_ranges(&self, l: &Path, ranges: &[Range<u64>]) -> Result<Vec<Bytes>> {
        let parts = self.inner.get_ranges(l, ranges).await?;
        self.delay().await;
        self.reads.fetch_add(1, Relaxed);
        let served: usize = parts.iter().map(Bytes::len).sum();
        self.bytes.fetch_add(served as u64, Relaxed);
        Ok(parts)
    }

    fn delete_stream(
        &self,
        locations: BoxStream<'static, Result<Path>>,
    ) -> BoxStream<'static, Result<Path>> {
        self.inner.delete_stream(locations)
    }

    fn list(&self, prefix: Option<&Path>) -> BoxStream<'static, Result<ObjectMeta>> {
        self.inner.list(prefix)
    }

    async fn list_with_delimiter(&self, prefix: Option<&Path>) -> Result<ListResult> {
        self.inner.list_with_delimiter(prefix).await
    }

    async fn copy_opts(&self, from: &Path, to: &Path, o: CopyOptions) -> Result<()> {
        self.inner.copy_opts(from, to, o).await
    }
}
