//! The I/O layer: every object store a session reads or writes through is wrapped, and
//! each request is counted in the [`IoCounters`] of the operator task whose frame is open
//! when the request starts (the scan or the sink that made it, or the operator whose
//! spawned work made it).
//!
//! Reads are counted by the bytes they deliver: a streamed body as its chunks arrive, a
//! range request by its bytes. A local file handed out open (`GetResultPayload::File`) is
//! counted by the range handed out, and its time ends there: the reading of an open file
//! is the scan's own work. Requests made outside any operator (schema inference, listing
//! files while planning) are not counted.

use std::fmt;
use std::ops::Range;
use std::pin::Pin;
use std::sync::{Arc, Mutex, PoisonError};
use std::task::{Context, Poll};

use async_trait::async_trait;
use bytes::Bytes;
use datafusion::common::Result as DfResult;
use datafusion::execution::object_store::ObjectStoreRegistry;
use datafusion::object_store::path::Path;
use datafusion::object_store::{
    CopyOptions, GetOptions, GetResult, GetResultPayload, ListResult, MultipartUpload, ObjectMeta,
    ObjectStore, PutMultipartOptions, PutOptions, PutPayload, PutResult, RenameOptions, Result,
    UploadPart,
};
use futures::stream::BoxStream;
use futures::{FutureExt, Stream, StreamExt};
use qprof_core::attribution;
use qprof_core::io::{IoCounters, ReadInFlight, StorageTier};
use qprof_core::periodic::PeriodicUpdater;
use url::Url;

/// The updater the I/O counters of every session register with: the process's, or, if its
/// thread could not be started, one of their own that only samples at stop.
pub(crate) fn process_updater() -> Arc<PeriodicUpdater> {
    match PeriodicUpdater::process() {
        Some(updater) => Arc::clone(updater),
        None => PeriodicUpdater::new(Arc::new(qprof_core::clock::SystemClock)),
    }
}

/// The I/O counters of the operator task running on this thread, if any.
fn current_io(updater: &Arc<PeriodicUpdater>) -> Option<Arc<IoCounters>> {
    let task = attribution::current()?;
    Some(Arc::clone(task.io_or_init(|| IoCounters::new(updater))))
}

/// Counts one metadata request of the current task, if any.
fn metadata_request(updater: &Arc<PeriodicUpdater>) {
    if let Some(io) = current_io(updater) {
        io.record_metadata_request();
    }
}

/// An object store whose requests are counted in the operator tasks that make them.
pub(crate) struct ProfiledObjectStore {
    inner: Arc<dyn ObjectStore>,
    updater: Arc<PeriodicUpdater>,
}

impl ProfiledObjectStore {
    pub(crate) fn new(inner: Arc<dyn ObjectStore>, updater: Arc<PeriodicUpdater>) -> Self {
        Self { inner, updater }
    }
}

impl fmt::Debug for ProfiledObjectStore {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("ProfiledObjectStore")
            .field("inner", &self.inner)
            .finish()
    }
}

impl fmt::Display for ProfiledObjectStore {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        // the store's own name: error messages read as without qprof
        fmt::Display::fmt(&self.inner, f)
    }
}

#[async_trait]
impl ObjectStore for ProfiledObjectStore {
    async fn put_opts(
        &self,
        location: &Path,
        payload: PutPayload,
        opts: PutOptions,
    ) -> Result<PutResult> {
        let io = current_io(&self.updater);
        let bytes = payload.content_length() as u64;
        let started = io.as_ref().map(|io| io.now_nanos());
        let result = self.inner.put_opts(location, payload, opts).await;
        if let (Some(io), Some(started)) = (io, started) {
            io.record_write(bytes, io.now_nanos().saturating_sub(started));
            if result.is_ok() {
                io.record_file_written();
            }
        }
        result
    }

    async fn put_multipart_opts(
        &self,
        location: &Path,
        opts: PutMultipartOptions,
    ) -> Result<Box<dyn MultipartUpload>> {
        let io = current_io(&self.updater);
        let upload = self.inner.put_multipart_opts(location, opts).await?;
        Ok(match io {
            Some(io) => Box::new(ProfiledUpload { inner: upload, io }),
            None => upload,
        })
    }

    async fn get_opts(&self, location: &Path, options: GetOptions) -> Result<GetResult> {
        let Some(io) = current_io(&self.updater) else {
            return self.inner.get_opts(location, options).await;
        };
        if options.head {
            io.record_metadata_request();
            return self.inner.get_opts(location, options).await;
        }
        let read = io.begin_read();
        let mut result = self.inner.get_opts(location, options).await?;
        result.payload = match result.payload {
            GetResultPayload::Stream(body) => GetResultPayload::Stream(
                CountedBody {
                    inner: body,
                    read: Some(read),
                }
                .boxed(),
            ),
            file @ GetResultPayload::File(..) => {
                read.delivered(result.range.end - result.range.start, StorageTier::Storage);
                read.finish();
                file
            }
        };
        Ok(result)
    }

    async fn get_ranges(&self, location: &Path, ranges: &[Range<u64>]) -> Result<Vec<Bytes>> {
        let Some(io) = current_io(&self.updater) else {
            return self.inner.get_ranges(location, ranges).await;
        };
        let read = io.begin_read();
        let parts = self.inner.get_ranges(location, ranges).await?;
        let bytes: usize = parts.iter().map(Bytes::len).sum();
        read.delivered(bytes as u64, StorageTier::Storage);
        read.finish();
        Ok(parts)
    }

    fn delete_stream(
        &self,
        locations: BoxStream<'static, Result<Path>>,
    ) -> BoxStream<'static, Result<Path>> {
        metadata_request(&self.updater);
        self.inner.delete_stream(locations)
    }

    fn list(&self, prefix: Option<&Path>) -> BoxStream<'static, Result<ObjectMeta>> {
        metadata_request(&self.updater);
        self.inner.list(prefix)
    }

    fn list_with_offset(
        &self,
        prefix: Option<&Path>,
        offset: &Path,
    ) -> BoxStream<'static, Result<ObjectMeta>> {
        metadata_request(&self.updater);
        self.inner.list_with_offset(prefix, offset)
    }

    async fn list_with_delimiter(&self, prefix: Option<&Path>) -> Result<ListResult> {
        metadata_request(&self.updater);
        self.inner.list_with_delimiter(prefix).await
    }

    async fn copy_opts(&self, from: &Path, to: &Path, options: CopyOptions) -> Result<()> {
        metadata_request(&self.updater);
        self.inner.copy_opts(from, to, options).await
    }

    async fn rename_opts(&self, from: &Path, to: &Path, options: RenameOptions) -> Result<()> {
        metadata_request(&self.updater);
        self.inner.rename_opts(from, to, options).await
    }
}

/// A read's body, counted as it arrives; the read is in flight until the body ends, fails
/// or is dropped.
struct CountedBody {
    inner: BoxStream<'static, Result<Bytes>>,
    read: Option<ReadInFlight>,
}

impl Stream for CountedBody {
    type Item = Result<Bytes>;

    fn poll_next(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Option<Self::Item>> {
        let polled = self.inner.poll_next_unpin(cx);
        match &polled {
            Poll::Ready(Some(Ok(chunk))) => {
                if let Some(read) = &self.read {
                    read.delivered(chunk.len() as u64, StorageTier::Storage);
                }
            }
            Poll::Ready(Some(Err(_)) | None) => {
                if let Some(read) = self.read.take() {
                    read.finish();
                }
            }
            Poll::Pending => {}
        }
        polled
    }
}

/// A multipart upload whose parts are counted as writes of the task that started it.
#[derive(Debug)]
struct ProfiledUpload {
    inner: Box<dyn MultipartUpload>,
    io: Arc<IoCounters>,
}

#[async_trait]
impl MultipartUpload for ProfiledUpload {
    fn put_part(&mut self, data: PutPayload) -> UploadPart {
        let bytes = data.content_length() as u64;
        let io = Arc::clone(&self.io);
        let started = io.now_nanos();
        self.inner
            .put_part(data)
            .map(move |result| {
                io.record_write(bytes, io.now_nanos().saturating_sub(started));
                result
            })
            .boxed()
    }

    async fn complete(&mut self) -> Result<PutResult> {
        let result = self.inner.complete().await;
        if result.is_ok() {
            self.io.record_file_written();
        }
        result
    }

    async fn abort(&mut self) -> Result<()> {
        self.inner.abort().await
    }
}

/// A store and its wrapper.
type Wrapped = (Arc<dyn ObjectStore>, Arc<dyn ObjectStore>);

/// A session's object-store registry with every store it hands out wrapped in a
/// [`ProfiledObjectStore`] (one wrapper per store, kept for the registry's life).
pub(crate) struct ProfilingObjectStoreRegistry {
    inner: Arc<dyn ObjectStoreRegistry>,
    updater: Arc<PeriodicUpdater>,
    /// A handful per session.
    wrapped: Mutex<Vec<Wrapped>>,
}

impl ProfilingObjectStoreRegistry {
    pub(crate) fn new(inner: Arc<dyn ObjectStoreRegistry>, updater: Arc<PeriodicUpdater>) -> Self {
        Self {
            inner,
            updater,
            wrapped: Mutex::new(Vec::new()),
        }
    }

    fn wrap(&self, store: Arc<dyn ObjectStore>) -> Arc<dyn ObjectStore> {
        let mut wrapped = self.wrapped.lock().unwrap_or_else(PoisonError::into_inner);
        if let Some((_, wrapper)) = wrapped.iter().find(|(s, _)| Arc::ptr_eq(s, &store)) {
            return Arc::clone(wrapper);
        }
        let wrapper: Arc<dyn ObjectStore> = Arc::new(ProfiledObjectStore::new(
            Arc::clone(&store),
            Arc::clone(&self.updater),
        ));
        wrapped.push((store, Arc::clone(&wrapper)));
        wrapper
    }
}

impl fmt::Debug for ProfilingObjectStoreRegistry {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("ProfilingObjectStoreRegistry")
            .field("inner", &self.inner)
            .finish_non_exhaustive()
    }
}

impl ObjectStoreRegistry for ProfilingObjectStoreRegistry {
    fn register_store(
        &self,
        url: &Url,
        store: Arc<dyn ObjectStore>,
    ) -> Option<Arc<dyn ObjectStore>> {
        self.inner.register_store(url, store)
    }

    fn deregister_store(&self, url: &Url) -> DfResult<Arc<dyn ObjectStore>> {
        self.inner.deregister_store(url)
    }

    fn get_store(&self, url: &Url) -> DfResult<Arc<dyn ObjectStore>> {
        Ok(self.wrap(self.inner.get_store(url)?))
    }
}
