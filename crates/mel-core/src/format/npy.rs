//! `.npy` headers, written and read in one place: melctl writes version 1.0 headers of
//! [`HEADER_LEN`] bytes; the reader takes versions 1 to 3 as numpy writes them, C order
//! and the element types melctl writes, and nothing else. The byte-level parts live
//! here; opening files and checking their lengths is the reader's (melread).

use crate::spec::Dtype;

/// The length of the headers melctl writes (magic, version, length, dictionary, padding).
pub const HEADER_LEN: usize = 256;

/// The longest header a reader accepts (numpy writes under 1 KiB).
pub const MAX_HEADER: usize = 1 << 20;

/// The magic every `.npy` file starts with.
pub const MAGIC: &[u8; 6] = b"\x93NUMPY";

/// The element types of the `.npy` files melctl writes.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum NpyType {
    /// `<f4`.
    F32,
    /// `<f2`.
    F16,
    /// `<u2` (melctl's bf16 bit patterns).
    U16,
    /// `<i8` (labels).
    I64,
}

impl NpyType {
    /// Every type, in the order the refusal of another lists them.
    pub const ALL: [NpyType; 4] = [NpyType::F32, NpyType::F16, NpyType::U16, NpyType::I64];

    /// The type spectrograms of `dtype` are stored as.
    pub fn of(dtype: Dtype) -> NpyType {
        match dtype {
            Dtype::F32 => NpyType::F32,
            Dtype::F16 => NpyType::F16,
            Dtype::Bf16 => NpyType::U16,
        }
    }

    /// numpy's `descr` string.
    pub fn descr(self) -> &'static str {
        match self {
            NpyType::F32 => "<f4",
            NpyType::F16 => "<f2",
            NpyType::U16 => "<u2",
            NpyType::I64 => "<i8",
        }
    }

    /// Bytes per element.
    pub fn size(self) -> usize {
        match self {
            NpyType::F32 => 4,
            NpyType::F16 | NpyType::U16 => 2,
            NpyType::I64 => 8,
        }
    }
}

/// The version 1.0 header of a C-order array of `ty` and `shape`, padded with spaces to
/// [`HEADER_LEN`] bytes and ended by a newline, as numpy aligns it.
pub fn header(ty: NpyType, shape: &[usize]) -> Vec<u8> {
    let dims: Vec<String> = shape.iter().map(|d| d.to_string()).collect();
    let shape_text = if dims.len() == 1 {
        format!("({},)", dims[0])
    } else {
        format!("({})", dims.join(", "))
    };
    let dict = format!(
        "{{'descr': '{}', 'fortran_order': False, 'shape': {shape_text}, }}",
        ty.descr()
    );
    let mut h = MAGIC.to_vec();
    h.extend_from_slice(&[1, 0]);
    h.extend_from_slice(&((HEADER_LEN - 10) as u16).to_le_bytes());
    h.extend_from_slice(dict.as_bytes());
    h.resize(HEADER_LEN - 1, b' ');
    h.push(b'\n');
    h
}

/// From the first bytes of a file (`pre`, up to 12 of them): the dictionary's length and
/// where it starts, or why this is not a `.npy` file a reader takes. The length is the
/// file's claim: a reader holds it to [`MAX_HEADER`] and the file's length.
pub fn preamble(pre: &[u8]) -> Result<(usize, usize), String> {
    if pre.len() < 10 || &pre[..6] != MAGIC {
        return Err("not a .npy file (no \\x93NUMPY magic)".into());
    }
    let (len, start) = match pre[6] {
        1 => (u16::from_le_bytes([pre[8], pre[9]]) as usize, 10),
        2 | 3 if pre.len() < 12 => {
            return Err("truncated: the file ends inside its .npy preamble".into());
        }
        2 | 3 => (
            u32::from_le_bytes([pre[8], pre[9], pre[10], pre[11]]) as usize,
            12,
        ),
        v => return Err(format!(".npy format version {v} is not supported")),
    };
    Ok((len, start))
}

/// Parses numpy's header dictionary, `{'descr': '<f2', 'fortran_order': False, 'shape':
/// (3, 4), }`: a type melctl writes, C order, and the shape.
pub fn parse_dict(text: &str) -> Result<(NpyType, Vec<usize>), String> {
    let body = text
        .trim_end_matches(['\n', ' ', '\0'])
        .trim()
        .strip_prefix('{')
        .and_then(|t| t.trim_end().strip_suffix('}'))
        .ok_or_else(|| format!("the .npy header is not a dictionary: {text:?}"))?;
    let mut descr = None;
    let mut fortran = None;
    let mut shape = None;
    let mut rest = body.trim();
    while !rest.is_empty() {
        let (key, after) =
            quoted(rest).ok_or_else(|| format!("bad .npy header key in {text:?}"))?;
        if key == "descr" && descr.is_some()
            || key == "fortran_order" && fortran.is_some()
            || key == "shape" && shape.is_some()
        {
            return Err(format!("the .npy header gives {key:?} twice"));
        }
        let after = after
            .trim_start()
            .strip_prefix(':')
            .ok_or_else(|| format!("bad .npy header near {key:?}"))?
            .trim_start();
        let after = match key {
            "descr" => {
                let (v, a) = quoted(after).ok_or("bad 'descr' in the .npy header")?;
                descr = Some(v.to_string());
                a
            }
            "fortran_order" => {
                let (v, a) = if let Some(a) = after.strip_prefix("False") {
                    (false, a)
                } else if let Some(a) = after.strip_prefix("True") {
                    (true, a)
                } else {
                    return Err("bad 'fortran_order' in the .npy header".into());
                };
                fortran = Some(v);
                a
            }
            "shape" => {
                let inner = after
                    .strip_prefix('(')
                    .ok_or("bad 'shape' in the .npy header")?;
                let close = inner.find(')').ok_or("bad 'shape' in the .npy header")?;
                // `()`, `(3,)`, `(3, 4)`: one empty part only after a trailing comma.
                let mut parts: Vec<&str> = inner[..close].split(',').map(str::trim).collect();
                if parts.last() == Some(&"") {
                    parts.pop();
                }
                let dims = parts
                    .iter()
                    .map(|d| d.trim_end_matches('L').parse::<usize>())
                    .collect::<Result<Vec<_>, _>>()
                    .map_err(|_| format!("bad shape {:?} in the .npy header", &inner[..close]))?;
                shape = Some(dims);
                &inner[close + 1..]
            }
            other => return Err(format!("unknown key {other:?} in the .npy header")),
        };
        rest = after.trim_start();
        rest = rest.strip_prefix(',').unwrap_or(rest).trim_start();
    }
    if fortran != Some(false) {
        return Err("only C-order .npy arrays are read (fortran_order must be False)".into());
    }
    let descr = descr.ok_or("the .npy header has no 'descr'")?;
    let ty = NpyType::ALL
        .into_iter()
        .find(|t| t.descr() == descr)
        .ok_or_else(|| {
            let known = NpyType::ALL.map(NpyType::descr).join(", ");
            format!("element type {descr:?} is not one melctl writes ({known})")
        })?;
    let shape = shape.ok_or("the .npy header has no 'shape'")?;
    Ok((ty, shape))
}

/// A single- or double-quoted string at the start of `s` (after whitespace), and what
/// follows it.
fn quoted(s: &str) -> Option<(&str, &str)> {
    let s = s.trim_start();
    let q = s.chars().next().filter(|c| *c == '\'' || *c == '"')?;
    let inner = &s[1..];
    let end = inner.find(q)?;
    Some((&inner[..end], &inner[end + 1..]))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn what_is_written_reads_back_for_every_type_and_shape() {
        for ty in NpyType::ALL {
            for shape in [vec![], vec![7], vec![4, 79, 3, 32, 5], vec![0, 32]] {
                let h = header(ty, &shape);
                assert_eq!(h.len(), HEADER_LEN);
                assert_eq!(h.len() % 64, 0, "numpy aligns the data to 64 bytes");
                let (len, start) = preamble(&h[..12]).unwrap();
                assert_eq!(start + len, HEADER_LEN);
                let text = std::str::from_utf8(&h[start..start + len]).unwrap();
                assert_eq!(parse_dict(text).unwrap(), (ty, shape.clone()));
            }
        }
    }

    #[test]
    fn numpys_own_headers_parse_and_others_are_refused() {
        let (t, s) = parse_dict(
            "{'descr': '<f2', 'fortran_order': False, 'shape': (4, 79, 3, 32, 5), }    \n",
        )
        .unwrap();
        assert_eq!((t, s), (NpyType::F16, vec![4, 79, 3, 32, 5]));
        let (t, s) =
            parse_dict("{'descr': '<i8', 'fortran_order': False, 'shape': (7,), }").unwrap();
        assert_eq!((t, s), (NpyType::I64, vec![7]));
        let (_, s) = parse_dict("{'descr': '<f4', 'fortran_order': False, 'shape': (), }").unwrap();
        assert!(s.is_empty());
        for bad in [
            "{'descr': '>f4', 'fortran_order': False, 'shape': (1,), }",
            "{'descr': '<f4', 'fortran_order': True, 'shape': (1,), }",
            "{'descr': '<f4', 'shape': (1,), }",
            "{'descr': '<f4', 'fortran_order': False, 'shape': (1, x), }",
            "{'descr': '<f4', 'fortran_order': False, 'shape': (1,), 'x': 1}",
            "{'descr': '<f4', 'fortran_order': False, 'shape': (28,, 79), }",
            "{'descr': '<f4', 'fortran_order': False, 'shape': (,), }",
            "{'descr': '<f4', 'descr': '<f2', 'fortran_order': False, 'shape': (1,), }",
            "not a dict",
        ] {
            assert!(parse_dict(bad).is_err(), "{bad}");
        }
        assert!(
            preamble(b"\x93NUMPY\x02\x00\x10").is_err(),
            "a cut v2 preamble"
        );
        assert!(preamble(b"\x93NUMPY\x04\x00\x10\x00").is_err(), "version 4");
        assert!(preamble(b"PK\x03\x04\x00\x00\x00\x00\x00\x00").is_err());
        let huge = [MAGIC.as_slice(), &[2, 0], &u32::MAX.to_le_bytes()].concat();
        assert_eq!(preamble(&huge), Ok((u32::MAX as usize, 12)));
    }
}
