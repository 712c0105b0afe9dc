//! Compression codecs of event-log files, decoded as streams and tolerantly: a file cut
//! off in the middle of a frame or block (a log still being written) yields everything
//! before the cut. Nothing a file states sizes an allocation: an lz4 block's declared
//! length is checked against lz4-java's largest block before any buffer is made, and
//! every reader of decoded bytes stops at a limit of its caller's.

use std::io::Read;

use crate::EventLogError;

/// How an event-log file is compressed, from its name's extension.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Codec {
    /// Plain JSON lines.
    None,
    /// Zstandard frames (`.zstd`, as Spark names them).
    Zstd,
    /// lz4-java's `LZ4BlockOutputStream` framing (`.lz4`), Spark's default codec.
    Lz4,
    /// Snappy (`.snappy`): recognised, not decoded.
    Snappy,
    /// LZF (`.lzf`): recognised, not decoded.
    Lzf,
}

/// A stream of a file's decoded bytes; [`Decoded::cut`] tells, once it has ended, whether
/// the input ended inside a frame or block.
pub(crate) struct Decoded<'a> {
    inner: Inner<'a>,
    cut: bool,
}

enum Inner<'a> {
    Plain(&'a [u8]),
    Zstd(Box<zstd::stream::read::Decoder<'a, &'a [u8]>>),
    Lz4(Lz4Blocks<'a>),
    Failed,
}

impl Decoded<'_> {
    /// Up to `buf.len()` decoded bytes; 0 at the end (or at a cut: see [`Decoded::cut`]).
    pub(crate) fn read(&mut self, buf: &mut [u8]) -> usize {
        let read = match &mut self.inner {
            Inner::Plain(rest) => Read::read(rest, buf).map_err(|_| ()),
            Inner::Zstd(decoder) => decoder.read(buf).map_err(|_| ()),
            Inner::Lz4(blocks) => blocks.read(buf),
            Inner::Failed => Err(()),
        };
        match read {
            Ok(n) => n,
            Err(()) => {
                self.cut = true;
                self.inner = Inner::Plain(&[]);
                0
            }
        }
    }

    /// Whether the input ended inside a frame or block (or its header was not the codec's).
    pub(crate) fn cut(&self) -> bool {
        self.cut
    }
}

impl Codec {
    /// The codec named by a Spark short codec name (`zstd`, `lz4`, ...).
    pub fn from_short_name(name: &str) -> Option<Codec> {
        match name {
            "zstd" => Some(Codec::Zstd),
            "lz4" => Some(Codec::Lz4),
            "snappy" => Some(Codec::Snappy),
            "lzf" => Some(Codec::Lzf),
            _ => None,
        }
    }

    /// The file-name extension Spark uses for this codec (empty for none).
    pub fn extension(self) -> &'static str {
        match self {
            Codec::None => "",
            Codec::Zstd => ".zstd",
            Codec::Lz4 => ".lz4",
            Codec::Snappy => ".snappy",
            Codec::Lzf => ".lzf",
        }
    }

    /// A stream of `raw`'s decoded bytes.
    ///
    /// # Errors
    /// If qprof cannot decode this codec.
    pub(crate) fn decoder(self, raw: &[u8]) -> Result<Decoded<'_>, EventLogError> {
        let inner = match self {
            Codec::None => Inner::Plain(raw),
            Codec::Zstd => match zstd::stream::read::Decoder::with_buffer(raw) {
                Ok(decoder) => Inner::Zstd(Box::new(decoder)),
                Err(_) => Inner::Failed,
            },
            Codec::Lz4 => Inner::Lz4(Lz4Blocks::new(raw)),
            Codec::Snappy | Codec::Lzf => {
                return Err(EventLogError::UnsupportedCodec(
                    self.extension().trim_start_matches('.').to_string(),
                ));
            }
        };
        Ok(Decoded { inner, cut: false })
    }

    /// Decodes a whole file's bytes, at most `limit` of them. Returns the decoded bytes
    /// and whether the input ended inside a frame or block (the decoded bytes then hold
    /// everything before the cut).
    ///
    /// # Errors
    /// If qprof cannot decode this codec, or the file decodes to more than `limit` bytes.
    pub fn decode(self, raw: &[u8], limit: u64) -> Result<(Vec<u8>, bool), EventLogError> {
        let mut decoded = self.decoder(raw)?;
        let mut out = Vec::new();
        let mut buf = vec![0u8; 64 * 1024];
        loop {
            let n = decoded.read(&mut buf);
            if n == 0 {
                return Ok((out, decoded.cut()));
            }
            if (out.len() + n) as u64 > limit {
                return Err(EventLogError::DecodedTooLarge { limit });
            }
            out.extend_from_slice(&buf[..n]);
        }
    }
}

const LZ4_MAGIC: &[u8; 8] = b"LZ4Block";
const LZ4_HEADER: usize = 8 + 1 + 4 + 4 + 4;
const LZ4_METHOD_RAW: u8 = 0x10;
const LZ4_METHOD_LZ4: u8 = 0x20;
/// lz4-java's largest block (`LZ4BlockOutputStream` refuses a larger block size): a header
/// that states more is not lz4-java's.
const LZ4_MAX_BLOCK: usize = 32 << 20;

/// lz4-java's block stream: per block the magic `LZ4Block`, a token (method and level),
/// compressed and decompressed lengths and a checksum (little-endian), then data. One
/// block is decoded at a time.
struct Lz4Blocks<'a> {
    raw: &'a [u8],
    pos: usize,
    block: Vec<u8>,
    at: usize,
}

impl<'a> Lz4Blocks<'a> {
    fn new(raw: &'a [u8]) -> Lz4Blocks<'a> {
        Lz4Blocks {
            raw,
            pos: 0,
            block: Vec::new(),
            at: 0,
        }
    }

    /// Decodes the next block into `self.block`; `Ok(false)` at the stream's end.
    fn next_block(&mut self) -> Result<bool, ()> {
        let raw = self.raw;
        if self.pos >= raw.len() {
            return Ok(false);
        }
        let header = raw.get(self.pos..self.pos + LZ4_HEADER).ok_or(())?;
        if &header[..8] != LZ4_MAGIC {
            return Err(());
        }
        let method = header[8] & 0xF0;
        let le = |at: usize| {
            u32::from_le_bytes([header[at], header[at + 1], header[at + 2], header[at + 3]])
                as usize
        };
        let (compressed, decompressed) = (le(9), le(13));
        if compressed > LZ4_MAX_BLOCK || decompressed > LZ4_MAX_BLOCK {
            return Err(());
        }
        let start = self.pos + LZ4_HEADER;
        let data = raw.get(start..start + compressed).ok_or(())?;
        self.pos = start + compressed;
        self.at = 0;
        self.block.clear();
        match method {
            LZ4_METHOD_RAW => self.block.extend_from_slice(data),
            // an lz4 block expands at most 255 times (one literal-length byte a 255 bytes)
            LZ4_METHOD_LZ4 if decompressed <= compressed.saturating_mul(255) + 16 => {
                self.block.resize(decompressed, 0);
                match lz4_flex::block::decompress_into(data, &mut self.block) {
                    Ok(n) if n == decompressed => {}
                    _ => return Err(()),
                }
            }
            _ => return Err(()),
        }
        Ok(true)
    }

    fn read(&mut self, buf: &mut [u8]) -> Result<usize, ()> {
        while self.at == self.block.len() {
            if !self.next_block()? {
                return Ok(0);
            }
        }
        let n = buf.len().min(self.block.len() - self.at);
        buf[..n].copy_from_slice(&self.block[self.at..self.at + n]);
        self.at += n;
        Ok(n)
    }
}

/// Encodes bytes in lz4-java's block framing (one block per 64 KiB, checksums zeroed), as
/// Spark's `lz4` codec writes them; used to test the reader.
pub fn encode_lz4_blocks(data: &[u8]) -> Vec<u8> {
    let mut out = Vec::new();
    for chunk in data.chunks(64 * 1024) {
        let compressed = lz4_flex::block::compress(chunk);
        out.extend_from_slice(LZ4_MAGIC);
        out.push(LZ4_METHOD_LZ4 | 6);
        out.extend_from_slice(&(compressed.len() as u32).to_le_bytes());
        out.extend_from_slice(&(chunk.len() as u32).to_le_bytes());
        out.extend_from_slice(&0u32.to_le_bytes());
        out.extend_from_slice(&compressed);
    }
    // lz4-java ends the stream with an empty raw block
    out.extend_from_slice(LZ4_MAGIC);
    out.push(LZ4_METHOD_RAW);
    out.extend_from_slice(&[0; 12]);
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    proptest! {
        #[test]
        fn lz4_blocks_round_trip_and_truncation_keeps_a_prefix(
            data in proptest::collection::vec(any::<u8>(), 0..200_000),
            cut in 0.0f64..1.0,
        ) {
            let encoded = encode_lz4_blocks(&data);
            prop_assert_eq!(Codec::Lz4.decode(&encoded, u64::MAX).unwrap(), (data.clone(), false));
            let cut = (encoded.len() as f64 * cut) as usize;
            let (prefix, _) = Codec::Lz4.decode(&encoded[..cut], u64::MAX).unwrap();
            prop_assert!(data.starts_with(&prefix));
        }
    }

    #[test]
    fn truncated_zstd_yields_the_complete_blocks() {
        use std::io::Write;
        let data: Vec<u8> = (0..300_000u32)
            .flat_map(|i| format!("{i}\n").into_bytes())
            .collect();
        let mut enc = zstd::stream::write::Encoder::new(Vec::new(), 3).unwrap();
        enc.write_all(&data[..100_000]).unwrap();
        enc.flush().unwrap();
        let flushed = enc.get_ref().len();
        enc.write_all(&data[100_000..]).unwrap();
        let full = enc.finish().unwrap();
        assert_eq!(
            Codec::Zstd.decode(&full, u64::MAX).unwrap(),
            (data.clone(), false)
        );
        let (prefix, cut) = Codec::Zstd.decode(&full[..flushed + 10], u64::MAX).unwrap();
        assert!(cut);
        assert!(prefix.len() >= 100_000 && data.starts_with(&prefix));
    }

    #[test]
    fn snappy_is_reported_not_guessed() {
        let err = Codec::Snappy.decode(b"x", u64::MAX).unwrap_err();
        assert_eq!(
            err.to_string(),
            "event log compressed with snappy, which qprof does not read (zstd, lz4 or none)"
        );
    }

    #[test]
    fn an_lz4_header_that_states_a_huge_block_is_a_cut_not_an_allocation() {
        // 21 bytes: the magic, the lz4 method, 1 compressed byte said to decode to 4 GiB
        let mut header = LZ4_MAGIC.to_vec();
        header.push(LZ4_METHOD_LZ4);
        header.extend_from_slice(&1u32.to_le_bytes());
        header.extend_from_slice(&u32::MAX.to_le_bytes());
        header.extend_from_slice(&0u32.to_le_bytes());
        header.push(0);
        assert_eq!(
            Codec::Lz4.decode(&header, u64::MAX).unwrap(),
            (Vec::new(), true)
        );
        // within lz4-java's block size but more than the data can expand to
        let mut header = header[..9].to_vec();
        header.extend_from_slice(&1u32.to_le_bytes());
        header.extend_from_slice(&(LZ4_MAX_BLOCK as u32).to_le_bytes());
        header.extend_from_slice(&0u32.to_le_bytes());
        header.push(0);
        assert_eq!(
            Codec::Lz4.decode(&header, u64::MAX).unwrap(),
            (Vec::new(), true)
        );
    }

    #[test]
    fn a_decompression_bomb_stops_at_the_limit() {
        use std::io::Write;
        let zeros = vec![0u8; 1 << 20];
        let mut enc = zstd::stream::write::Encoder::new(Vec::new(), 19).unwrap();
        for _ in 0..64 {
            enc.write_all(&zeros).unwrap();
        }
        let bomb = enc.finish().unwrap();
        assert!(bomb.len() < 16 << 10, "{} bytes", bomb.len());
        let err = Codec::Zstd.decode(&bomb, 8 << 20).unwrap_err();
        assert_eq!(
            err.to_string(),
            "the log decompresses to more than 8388608 bytes, the limit (--max-log-bytes)"
        );
        let lz4 = encode_lz4_blocks(&vec![0u8; 16 << 20]);
        assert!(matches!(
            Codec::Lz4.decode(&lz4, 1 << 20),
            Err(EventLogError::DecodedTooLarge { limit }) if limit == 1 << 20
        ));
        // under the limit it decodes whole
        assert_eq!(Codec::Lz4.decode(&lz4, 16 << 20).unwrap().0.len(), 16 << 20);
    }
}
