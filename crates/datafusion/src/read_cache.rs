//! An optional read cache in front of a session's object stores: objects are cut into
//! chunks of [`CHUNK_BYTES`], kept in memory and, with a disk tier, in files on local disk
//! (foyer's hybrid cache), and fetched from the store only when neither has them.
//!
//! Each read reports how many of the bytes it asked for came from each tier, so a scan's
//! `storageReadBytes`, `localReadBytes` and `ramReadBytes` add up to what it read.
//!
//! A chunk's key names the store, the object and the object's version (its e-tag, or its
//! size and modification time), so a changed object is never served stale: the version is
//! asked of the store once per object per process (a metadata request) and forgotten when
//! the object is written, copied, renamed or deleted through the session. The disk tier
//! outlives the process: a later run that opens the same directory starts warm.

use std::collections::HashMap;
use std::fmt;
use std::ops::Range;
use std::path::PathBuf;
use std::sync::{Arc, Mutex, PoisonError};

use bytes::{Bytes, BytesMut};
use datafusion::object_store::path::Path;
use datafusion::object_store::{GetOptions, GetRange, ObjectMeta, ObjectStore, ObjectStoreExt};
use foyer::{
    BlockEngineConfig, DeviceBuilder, FsDeviceBuilder, HybridCache, HybridCacheBuilder,
    HybridCachePolicy, Source,
};
use qprof_core::io::StorageTier;

/// The unit the cache keeps: objects are read from the store in chunks of this size
/// (the last chunk of an object is shorter).
pub const CHUNK_BYTES: u64 = 1 << 20;

/// The disk tier's files are written in blocks of this size (a chunk must fit in one).
const DISK_BLOCK_BYTES: usize = 4 << 20;

/// The smallest disk tier: a few blocks, so that one being written does not evict the
/// others.
pub const MIN_DISK_BYTES: u64 = 4 * DISK_BLOCK_BYTES as u64;

/// The memory tier a disk tier gets when none is given.
pub const DEFAULT_MEMORY_BYTES: u64 = 64 << 20;

/// Where and how much the cache keeps.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ReadCacheConfig {
    /// Bytes of chunks kept in memory (at least [`CHUNK_BYTES`]).
    pub memory_bytes: u64,
    /// A directory on local disk and the bytes the cache may use there.
    pub disk: Option<(PathBuf, u64)>,
}

/// Why a read cache could not be opened or closed.
#[derive(Debug, thiserror::Error)]
pub enum ReadCacheError {
    /// The memory tier is smaller than one chunk.
    #[error("read cache: the memory tier needs at least {CHUNK_BYTES} bytes, got {0}")]
    MemoryTooSmall(u64),
    /// The disk tier is smaller than [`MIN_DISK_BYTES`].
    #[error("read cache: the disk tier needs at least {MIN_DISK_BYTES} bytes, got {0}")]
    DiskTooSmall(u64),
    /// The disk tier's directory could not be created.
    #[error("read cache: cannot use {}: {source}", .dir.display())]
    Directory {
        /// The directory.
        dir: PathBuf,
        /// Why.
        source: std::io::Error,
    },
    /// The disk tier could not be opened in its directory.
    #[error("read cache: cannot use {}: {source}", .dir.display())]
    Disk {
        /// The directory.
        dir: PathBuf,
        /// What foyer reported.
        source: foyer::Error,
    },
    /// Chunks still being written to disk could not be written.
    #[error("read cache: closing the disk tier: {0}")]
    Close(foyer::Error),
}

/// How many of a read's bytes came from each tier.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub(crate) struct TierBytes {
    /// From the store.
    pub(crate) storage: u64,
    /// From the disk tier.
    pub(crate) local: u64,
    /// From the memory tier.
    pub(crate) ram: u64,
}

impl TierBytes {
    fn add(&mut self, tier: StorageTier, bytes: u64) {
        match tier {
            StorageTier::Storage => self.storage += bytes,
            StorageTier::LocalDisk => self.local += bytes,
            StorageTier::Ram => self.ram += bytes,
        }
    }

    /// Each tier with its bytes, the empty ones left out.
    pub(crate) fn by_tier(self) -> impl Iterator<Item = (StorageTier, u64)> {
        [
            (StorageTier::Storage, self.storage),
            (StorageTier::LocalDisk, self.local),
            (StorageTier::Ram, self.ram),
        ]
        .into_iter()
        .filter(|(_, bytes)| *bytes > 0)
    }
}

/// A read cache shared by the object stores of the sessions it is given to; see the
/// module documentation. Open it with [`ReadCache::open`], give it to
/// [`crate::Profiler::with_read_cache`], and [`ReadCache::close`] it at the end so that
/// chunks still on their way to disk get there.
pub struct ReadCache {
    chunks: HybridCache<String, Bytes>,
    config: ReadCacheConfig,
    /// Objects' metadata by store and path, as the store last reported it.
    versions: Mutex<HashMap<String, ObjectMeta>>,
}

impl fmt::Debug for ReadCache {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("ReadCache")
            .field("config", &self.config)
            .finish_non_exhaustive()
    }
}

impl ReadCache {
    /// Opens a cache as `config` says; a disk tier's directory is created if needed and
    /// what an earlier process left there is found again. Must run inside a Tokio runtime
    /// (the disk tier's writers are spawned on it).
    ///
    /// # Errors
    /// A tier smaller than its minimum, or a directory that cannot be used.
    pub async fn open(config: ReadCacheConfig) -> Result<Arc<ReadCache>, ReadCacheError> {
        if config.memory_bytes < CHUNK_BYTES {
            return Err(ReadCacheError::MemoryTooSmall(config.memory_bytes));
        }
        let memory = usize::try_from(config.memory_bytes).unwrap_or(usize::MAX);
        // a shard per 64 MiB, at most 8: a shard holds whole chunks
        let shards = (memory / (64 << 20)).clamp(1, 8);
        let builder = HybridCacheBuilder::new()
            .with_name("qprof-read-cache")
            .with_policy(HybridCachePolicy::WriteOnInsertion)
            .memory(memory)
            .with_shards(shards)
            .with_weighter(|key: &String, chunk: &Bytes| key.len() + chunk.len())
            .storage();
        let builder = match &config.disk {
            None => builder,
            Some((dir, bytes)) => {
                if *bytes < MIN_DISK_BYTES {
                    return Err(ReadCacheError::DiskTooSmall(*bytes));
                }
                std::fs::create_dir_all(dir).map_err(|source| ReadCacheError::Directory {
                    dir: dir.clone(),
                    source,
                })?;
                let disk_error = |source| ReadCacheError::Disk {
                    dir: dir.clone(),
                    source,
                };
                let device = FsDeviceBuilder::new(dir)
                    .with_capacity(usize::try_from(*bytes).unwrap_or(usize::MAX))
                    .build()
                    .map_err(disk_error)?;
                builder.with_engine_config(
                    BlockEngineConfig::new(device).with_block_size(DISK_BLOCK_BYTES),
                )
            }
        };
        let chunks = builder
            .build()
            .await
            .map_err(|source| ReadCacheError::Disk {
                dir: config.disk.clone().map(|(dir, _)| dir).unwrap_or_default(),
                source,
            })?;
        Ok(Arc::new(ReadCache {
            chunks,
            config,
            versions: Mutex::new(HashMap::new()),
        }))
    }

    /// What the cache was opened with.
    pub fn config(&self) -> &ReadCacheConfig {
        &self.config
    }

    /// Bytes the memory tier holds now.
    pub fn memory_bytes(&self) -> u64 {
        self.chunks.memory().usage() as u64
    }

    /// Waits for chunks on their way to the disk tier and closes it.
    ///
    /// # Errors
    /// The disk tier could not be written.
    pub async fn close(&self) -> Result<(), ReadCacheError> {
        self.chunks.close().await.map_err(ReadCacheError::Close)
    }

    /// The metadata of `location` in `store` (named `store_key`): asked of the store the
    /// first time, then remembered.
    pub(crate) async fn meta(
        &self,
        store: &Arc<dyn ObjectStore>,
        store_key: &str,
        location: &Path,
    ) -> datafusion::object_store::Result<ObjectMeta> {
        let object = object_key(store_key, location);
        if let Some(meta) = self.lock_versions().get(&object) {
            return Ok(meta.clone());
        }
        let meta = store.head(location).await?;
        self.lock_versions().insert(object, meta.clone());
        Ok(meta)
    }

    /// Forgets what is known of `location`'s version (it was written or removed).
    pub(crate) fn forget(&self, store_key: &str, location: &Path) {
        self.lock_versions()
            .remove(&object_key(store_key, location));
    }

    /// Reads `ranges` of the object `meta` describes, chunk by chunk from the fastest tier
    /// that has each; chunks missing from both tiers are fetched from `store` and kept. A
    /// chunk several ranges share is looked up once.
    pub(crate) async fn read(
        &self,
        store: &Arc<dyn ObjectStore>,
        store_key: &str,
        meta: &ObjectMeta,
        ranges: &[Range<u64>],
    ) -> datafusion::object_store::Result<(Vec<Bytes>, TierBytes)> {
        let mut indices: Vec<u64> = ranges
            .iter()
            .filter(|range| !range.is_empty())
            .flat_map(|range| range.start / CHUNK_BYTES..=(range.end - 1) / CHUNK_BYTES)
            .collect();
        indices.sort_unstable();
        indices.dedup();
        let version = version_of(meta);
        let fetched = futures::future::try_join_all(
            indices
                .iter()
                .map(|&index| self.chunk(store, store_key, meta, &version, index)),
        )
        .await?;
        let chunks: HashMap<u64, (Bytes, StorageTier)> = indices.into_iter().zip(fetched).collect();
        let mut tiers = TierBytes::default();
        let mut parts = Vec::with_capacity(ranges.len());
        for range in ranges {
            let mut out = BytesMut::with_capacity(range.end.saturating_sub(range.start) as usize);
            let mut at = range.start;
            while at < range.end {
                let index = at / CHUNK_BYTES;
                let chunk_start = index * CHUNK_BYTES;
                let (chunk, tier) = &chunks[&index];
                let to = range.end.min(chunk_start + chunk.len() as u64);
                if to <= at {
                    // the object is shorter than the range: as the store, stop at its end
                    break;
                }
                out.extend_from_slice(
                    &chunk[(at - chunk_start) as usize..(to - chunk_start) as usize],
                );
                tiers.add(*tier, to - at);
                at = to;
            }
            parts.push(out.freeze());
        }
        Ok((parts, tiers))
    }

    /// Chunk `index` of an object and the tier it came from.
    async fn chunk(
        &self,
        store: &Arc<dyn ObjectStore>,
        store_key: &str,
        meta: &ObjectMeta,
        version: &str,
        index: u64,
    ) -> datafusion::object_store::Result<(Bytes, StorageTier)> {
        let key = format!(
            "{}\u{0}{version}\u{0}{index}",
            object_key(store_key, &meta.location)
        );
        let start = index * CHUNK_BYTES;
        let end = (start + CHUNK_BYTES).min(meta.size);
        let fetch = {
            let store = Arc::clone(store);
            let location = meta.location.clone();
            async move {
                let options = GetOptions {
                    range: Some(GetRange::Bounded(start..end)),
                    ..GetOptions::default()
                };
                store.get_opts(&location, options).await?.bytes().await
            }
        };
        let entry = self
            .chunks
            .get_or_fetch(&key, || fetch)
            .await
            .map_err(|err| fetch_error(&meta.location, err))?;
        // a read that waited for another's fetch of the chunk is served by the store too
        let tier = match entry.source() {
            Source::Outer => StorageTier::Storage,
            Source::Disk => StorageTier::LocalDisk,
            Source::Memory => StorageTier::Ram,
        };
        Ok((entry.value().clone(), tier))
    }

    fn lock_versions(&self) -> std::sync::MutexGuard<'_, HashMap<String, ObjectMeta>> {
        self.versions.lock().unwrap_or_else(PoisonError::into_inner)
    }
}

fn object_key(store_key: &str, location: &Path) -> String {
    format!("{store_key}/{location}")
}

/// What identifies an object's content: its e-tag, else its size and modification time.
fn version_of(meta: &ObjectMeta) -> String {
    match &meta.e_tag {
        Some(tag) => tag.clone(),
        None => format!(
            "{}-{}",
            meta.size,
            meta.last_modified.timestamp_nanos_opt().unwrap_or_default()
        ),
    }
}

/// A failed chunk read as a store error naming the object (foyer's error carries the
/// store's).
fn fetch_error(location: &Path, err: foyer::Error) -> datafusion::object_store::Error {
    datafusion::object_store::Error::Generic {
        store: "read cache",
        source: format!("reading {location}: {err}").into(),
    }
}
