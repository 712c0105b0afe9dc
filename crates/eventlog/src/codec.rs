//! Compression codecs of event-log files, decoded tolerantly: a file cut off in the middle
//! of a frame or block (a log still being written) yields everything before the cut.

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

    /// Decodes a whole file's bytes. Returns the decoded bytes and whether the input ended
    /// inside a frame or block (the decoded bytes then hold everything before the cut).
    pub fn decode(self, raw: &[u8]) -> Result<(Vec<u8>, bool), EventLogError> {
        match self {
            Codec::None => Ok((raw.to_vec(), false)),
            Codec::Zstd => Ok(decode_zstd(raw)),
            Codec::Lz4 => Ok(decode_lz4_blocks(raw)),
            Codec::Snappy | Codec::Lzf => Err(EventLogError::UnsupportedCodec(
                self.extension().trim_start_matches('.').to_string(),
            )),
        }
    }
}

fn decode_zstd(raw: &[u8]) -> (Vec<u8>, bool) {
    let mut out = Vec::with_capacity(raw.len() * 4);
    let Ok(mut decoder) = zstd::stream::read::Decoder::with_buffer(raw) else {
        return (out, true);
    };
    let mut buf = vec![0u8; 64 * 1024];
    loop {
        match decoder.read(&mut buf) {
            Ok(0) => return (out, false),
            Ok(n) => out.extend_from_slice(&buf[..n]),
            Err(_) => return (out, true),
        }
    }
}

const LZ4_MAGIC: &[u8; 8] = b"LZ4Block";
const LZ4_HEADER: usize = 8 + 1 + 4 + 4 + 4;
const LZ4_METHOD_RAW: u8 = 0x10;
const LZ4_METHOD_LZ4: u8 = 0x20;

/// Decodes lz4-java's block stream: per block the magic `LZ4Block`, a token (method and
/// level), compressed and decompressed lengths and a checksum (little-endian), then data.
fn decode_lz4_blocks(raw: &[u8]) -> (Vec<u8>, bool) {
    let mut out = Vec::with_capacity(raw.len() * 4);
    let mut pos = 0;
    while pos < raw.len() {
        let Some(header) = raw.get(pos..pos + LZ4_HEADER) else {
            return (out, true);
        };
        if &header[..8] != LZ4_MAGIC {
            return (out, true);
        }
        let method = header[8] & 0xF0;
        let le = |at: usize| {
            u32::from_le_bytes([header[at], header[at + 1], header[at + 2], header[at + 3]])
                as usize
        };
        let (compressed, decompressed) = (le(9), le(13));
        pos += LZ4_HEADER;
        let Some(data) = raw.get(pos..pos + compressed) else {
            return (out, true);
        };
        pos += compressed;
        match method {
            LZ4_METHOD_RAW => out.extend_from_slice(data),
            LZ4_METHOD_LZ4 => {
                let start = out.len();
                out.resize(start + decompressed, 0);
                match lz4_flex::block::decompress_into(data, &mut out[start..]) {
                    Ok(n) if n == decompressed => {}
                    _ => {
                        out.truncate(start);
                        return (out, true);
                    }
                }
            }
            _ => return (out, true),
        }
    }
    (out, false)
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
            prop_assert_eq!(Codec::Lz4.decode(&encoded).unwrap(), (data.clone(), false));
            let cut = (encoded.len() as f64 * cut) as usize;
            let (prefix, _) = Codec::Lz4.decode(&encoded[..cut]).unwrap();
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
        assert_eq!(Codec::Zstd.decode(&full).unwrap(), (data.clone(), false));
        let (prefix, cut) = Codec::Zstd.decode(&full[..flushed + 10]).unwrap();
        assert!(cut);
        assert!(prefix.len() >= 100_000 && data.starts_with(&prefix));
    }

    #[test]
    fn snappy_is_reported_not_guessed() {
        let err = Codec::Snappy.decode(b"x").unwrap_err();
        assert_eq!(
            err.to_string(),
            "event log compressed with snappy, which qprof does not read (zstd, lz4 or none)"
        );
    }
}
