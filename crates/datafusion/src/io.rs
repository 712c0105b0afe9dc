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
//!
//! With a [`ReadCache`], plain reads (no conditions, no version) go through it, and each
//! read's bytes are counted by the tier that served them.

use std::fmt;
use std::ops::Range;
use std::pin::Pin;
use std::sync::{Arc, Mutex, PoisonError};
use std::task::{Context, Poll};

use async_trait::async_trait;
use bytes::Bytes;
use datafusion::common::Result as DfResult;
use datafusion::execution::object_store::ObjectStoreRegistry;
use datafusion::object_store::GetRange;
use datafusion::object_store::path::Path;
use datafusion::object_store::{
    Attributes, CopyOptions, Error, GetOptions, GetResult, GetResultPayload, ListResult,
    MultipartUpload, ObjectMeta, ObjectStore, PutMultipartOptions, PutOptions, PutPayload,
    PutResult, RenameOptions, Result, UploadPart,
};
use futures::stream::BoxStream;
use futures::{FutureExt, Stream, StreamExt};
use qprof_core::attribution;
use qprof_core::io::{IoCounters, ReadInFlight, StorageTier};
use qprof_core::periodic::PeriodicUpdater;
use url::Url;

use crate::read_cache::{CHUNK_BYTES, ReadCache, TierBytes};

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

/// A read cache and the name the store has in its keys (its URL's scheme and authority).
#[derive(Debug, Clone)]
pub(crate) struct CacheSlot {
    cache: Arc<ReadCache>,
    store_key: String,
}

impl CacheSlot {
    fn forget(&self, location: &Path) {
        self.cache.forget(&self.store_key, location);
    }
}

/// An object store whose requests are counted in the operator tasks that make them, and
/// whose plain reads go through a read cache if it has one.
pub(crate) struct ProfiledObjectStore {
    inner: Arc<dyn ObjectStore>,
    updater: Arc<PeriodicUpdater>,
    cache: Option<CacheSlot>,
}

impl ProfiledObjectStore {
    pub(crate) fn new(
        inner: Arc<dyn ObjectStore>,
        updater: Arc<PeriodicUpdater>,
        cache: Option<CacheSlot>,
    ) -> Self {
        Self {
            inner,
            updater,
            cache,
        }
    }

    /// The cache, if this read can be served from it: a plain read, without conditions or
    /// a version.
    fn cache_for(&self, options: &GetOptions) -> Option<&CacheSlot> {
        let plain = !options.head
            && options.if_match.is_none()
            && options.if_none_match.is_none()
            && options.if_modified_since.is_none()
            && options.if_unmodified_since.is_none()
            && options.version.is_none();
        self.cache.as_ref().filter(|_| plain)
    }

    /// A plain read through the cache, counted by tier in the current task (if any).
    async fn cached_get(
        &self,
        slot: &CacheSlot,
        location: &Path,
        range: Option<GetRange>,
        io: Option<Arc<IoCounters>>,
    ) -> Result<GetResult> {
        let read = io.as_ref().map(IoCounters::begin_read);
        let meta = slot
            .cache
            .meta(&self.inner, &slot.store_key, location)
            .await?;
        let range = match range {
            None => 0..meta.size,
            Some(range) => range.as_range(meta.size).map_err(|err| Error::Generic {
                store: "read cache",
                source: Box::new(err),
            })?,
        };
        // chunk by chunk, as the store would stream it: a whole large object is never
        // held at once; the read is in flight until its body ends or is dropped
        let pieces: Vec<Range<u64>> = {
            let mut pieces = Vec::new();
            let mut at = range.start;
            while at < range.end {
                let end = range.end.min((at / CHUNK_BYTES + 1) * CHUNK_BYTES);
                pieces.push(at..end);
                at = end;
            }
            pieces
        };
        let (cache, store, store_key) = (
            Arc::clone(&slot.cache),
            Arc::clone(&self.inner),
            slot.store_key.clone(),
        );
        let object = meta.clone();
        let pieces = futures::stream::iter(pieces)
            .then(move |piece| {
                let (cache, store, store_key, object) = (
                    Arc::clone(&cache),
                    Arc::clone(&store),
                    store_key.clone(),
                    object.clone(),
                );
                async move {
                    let (mut parts, tiers) = cache
                        .read(&store, &store_key, &object, std::slice::from_ref(&piece))
                        .await?;
                    Ok((parts.pop().unwrap_or_default(), tiers))
                }
            })
            .boxed();
        let body = TieredBody {
            inner: pieces,
            read,
        };
        Ok(GetResult {
            payload: GetResultPayload::Stream(body.boxed()),
            meta,
            range,
            attributes: Attributes::default(),
        })
    }
}

fn deliver(read: &ReadInFlight, tiers: TierBytes) {
    for (tier, bytes) in tiers.by_tier() {
        read.delivered(bytes, tier);
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
        if let Some(slot) = &self.cache {
            slot.forget(location);
        }
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
        if let Some(slot) = &self.cache {
            slot.forget(location);
        }
        let io = current_io(&self.updater);
        let upload = self.inner.put_multipart_opts(location, opts).await?;
        Ok(match io {
            Some(io) => Box::new(ProfiledUpload { inner: upload, io }),
            None => upload,
        })
    }

    async fn get_opts(&self, location: &Path, options: GetOptions) -> Result<GetResult> {
        if let Some(slot) = self.cache_for(&options) {
            let io = current_io(&self.updater);
            return self.cached_get(slot, location, options.range, io).await;
        }
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
        if let Some(slot) = &self.cache {
            let read = current_io(&self.updater).map(|io| io.begin_read());
            let meta = slot
                .cache
                .meta(&self.inner, &slot.store_key, location)
                .await?;
            let (parts, tiers) = slot
                .cache
                .read(&self.inner, &slot.store_key, &meta, ranges)
                .await?;
            if let Some(read) = read {
                deliver(&read, tiers);
                read.finish();
            }
            return Ok(parts);
        }
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
        let locations = match self.cache.clone() {
            None => locations,
            Some(slot) => locations
                .inspect(move |location| {
                    if let Ok(location) = location {
                        slot.forget(location);
                    }
                })
                .boxed(),
        };
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
        if let Some(slot) = &self.cache {
            slot.forget(to);
        }
        self.inner.copy_opts(from, to, options).await
    }

    async fn rename_opts(&self, from: &Path, to: &Path, options: RenameOptions) -> Result<()> {
        metadata_request(&self.updater);
        if let Some(slot) = &self.cache {
            slot.forget(from);
            slot.forget(to);
        }
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

/// A read served by the cache piece by piece, each piece counted by the tiers that served
/// it; the read is in flight until the body ends, fails or is dropped.
struct TieredBody {
    inner: BoxStream<'static, Result<(Bytes, TierBytes)>>,
    read: Option<ReadInFlight>,
}

impl Stream for TieredBody {
    type Item = Result<Bytes>;

    fn poll_next(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Option<Self::Item>> {
        match self.inner.poll_next_unpin(cx) {
            Poll::Pending => Poll::Pending,
            Poll::Ready(Some(Ok((bytes, tiers)))) => {
                if let Some(read) = &self.read {
                    deliver(read, tiers);
                }
                Poll::Ready(Some(Ok(bytes)))
            }
            Poll::Ready(other) => {
                if let Some(read) = self.read.take() {
                    read.finish();
                }
                Poll::Ready(other.map(|end| end.map(|(bytes, _)| bytes)))
            }
        }
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
    cache: Option<Arc<ReadCache>>,
    /// A handful per session.
    wrapped: Mutex<Vec<Wrapped>>,
}

impl ProfilingObjectStoreRegistry {
    pub(crate) fn new(
        inner: Arc<dyn ObjectStoreRegistry>,
        updater: Arc<PeriodicUpdater>,
        cache: Option<Arc<ReadCache>>,
    ) -> Self {
        Self {
            inner,
            updater,
            cache,
            wrapped: Mutex::new(Vec::new()),
        }
    }

    fn wrap(&self, url: &Url, store: Arc<dyn ObjectStore>) -> Arc<dyn ObjectStore> {
        let mut wrapped = self.wrapped.lock().unwrap_or_else(PoisonError::into_inner);
        if let Some((_, wrapper)) = wrapped.iter().find(|(s, _)| Arc::ptr_eq(s, &store)) {
            return Arc::clone(wrapper);
        }
        let cache = self.cache.as_ref().map(|cache| CacheSlot {
            cache: Arc::clone(cache),
            store_key: format!("{}://{}", url.scheme(), url.authority()),
        });
        let wrapper: Arc<dyn ObjectStore> = Arc::new(ProfiledObjectStore::new(
            Arc::clone(&store),
            Arc::clone(&self.updater),
            cache,
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
        Ok(self.wrap(url, self.inner.get_store(url)?))
    }
}
