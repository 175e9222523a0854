//! Checks a decoded exchange page before anything reads it: the checks Arrow's IPC
//! reader makes, with a cheaper one for string views. `Page::decode` calls it.
//!
//! Why not Arrow's own: it checks a string view's UTF-8 string by string, and on
//! pages of short strings (TPC-H's comments and flags, which DataFusion reads from
//! Parquet as views) those calls took a fifth of an exchange link's CPU. Here each
//! data buffer is checked as UTF-8 once; a long string inside a valid buffer is then
//! valid exactly when both its ends fall on character boundaries. Everything else
//! (buffer sizes, nulls, offsets, nested and dictionary columns) goes through Arrow's
//! full validation, as before.

use datafusion::arrow::array::{ArrayData, RecordBatch};
use datafusion::arrow::buffer::Buffer;
use datafusion::arrow::datatypes::DataType;
use datafusion::arrow::error::ArrowError;

/// Longest string a view holds inline.
const MAX_INLINE: u32 = 12;
/// The high bit of each of the 12 bytes an inline string can take.
const HIGH_BITS: u128 = 0x8080_8080_8080_8080_8080_8080;

/// Every column of `batch` is valid Arrow data.
pub fn check_batch(batch: &RecordBatch) -> Result<(), ArrowError> {
    batch.columns().iter().try_for_each(|c| check_array(&c.to_data()))
}

fn check_array(data: &ArrayData) -> Result<(), ArrowError> {
    match data.data_type() {
        DataType::Utf8View => {
            data.validate()?;
            data.validate_nulls()?;
            let views = &data.buffer::<u128>(0)[..data.len()];
            check_string_views(views, &data.buffers()[1..])
        }
        _ => data.validate_full(),
    }
}

/// What Arrow's `validate_string_view` checks: zero padding after inline strings,
/// long strings inside their buffer and starting with their prefix, and all of them
/// UTF-8.
pub fn check_string_views(views: &[u128], buffers: &[Buffer]) -> Result<(), ArrowError> {
    let invalid = |idx: usize, what: &str| ArrowError::InvalidArgumentError(format!("string view {idx}: {what}"));
    // Views need not cover all of a buffer, and what they leave out need not be
    // UTF-8: such a buffer gets the check string by string.
    let whole: Vec<bool> = buffers.iter().map(|b| std::str::from_utf8(b).is_ok()).collect();
    let data: Vec<&[u8]> = buffers.iter().map(|b| b.as_slice()).collect();
    for (idx, &v) in views.iter().enumerate() {
        let len = v as u32;
        if len <= MAX_INLINE {
            // The string is the low `len` bytes of the view's last 12, the rest zero;
            // when no byte has its high bit set it is ASCII, hence UTF-8.
            let (inline, used) = (v >> 32, (1u128 << (8 * len)) - 1);
            if inline & !used != 0 {
                return Err(invalid(idx, "non-zero padding after an inline string"));
            }
            if inline & HIGH_BITS != 0 && std::str::from_utf8(&v.to_le_bytes()[4..4 + len as usize]).is_err() {
                return Err(invalid(idx, "not UTF-8"));
            }
            continue;
        }
        let (prefix, index, offset) = ((v >> 32) as u32, (v >> 64) as u32 as usize, (v >> 96) as u32 as usize);
        let text = *data.get(index).ok_or_else(|| invalid(idx, "no such data buffer"))?;
        let end = offset + len as usize;
        if end > text.len() {
            return Err(invalid(idx, "outside its data buffer"));
        }
        if text[offset..offset + 4] != prefix.to_le_bytes() {
            return Err(invalid(idx, "prefix differs from its data"));
        }
        let utf8 = if whole[index] {
            is_char_boundary(text, offset) && is_char_boundary(text, end)
        } else {
            std::str::from_utf8(&text[offset..end]).is_ok()
        };
        if !utf8 {
            return Err(invalid(idx, "not UTF-8"));
        }
    }
    Ok(())
}

/// Whether `at` starts a character (or ends the text) of the valid UTF-8 `text`:
/// continuation bytes are 0b10xx_xxxx.
fn is_char_boundary(text: &[u8], at: usize) -> bool {
    at == text.len() || (text[at] as i8) >= -0x40
}

#[cfg(test)]
mod tests {
    use super::*;
    use datafusion::arrow::array::{Array, StringViewArray};
    use rand::{Rng, SeedableRng};

    fn arrow_says(views: &[u128], buffers: &[Buffer]) -> bool {
        let array = StringViewArray::from_iter_values(["x"]);
        let data = array.to_data().into_builder().len(views.len());
        let data =
            data.buffers(std::iter::once(Buffer::from_vec(views.to_vec())).chain(buffers.iter().cloned()).collect());
        data.build().is_ok()
    }

    /// Views broken every way a byte can break them (lengths, offsets, buffer
    /// indexes, prefixes, padding, the data itself) are refused exactly when Arrow
    /// refuses them.
    #[test]
    fn agrees_with_arrow_on_mutated_views() {
        let words = [
            "a",
            "été",
            "naïve café au lait",
            "ünïcödé strings, long enough",
            "plain ascii text here",
            "日本語のテキストです",
            "",
        ];
        let mut rng = rand::rngs::StdRng::seed_from_u64(7);
        let (mut refused, mut accepted) = (0, 0);
        for round in 0..4000 {
            let values: Vec<String> = (0..rng.random_range(1..12))
                .map(|_| words[rng.random_range(0..words.len())].repeat(rng.random_range(1..3)))
                .collect();
            let array = StringViewArray::from_iter_values(values.iter());
            let data = array.to_data();
            let mut views: Vec<u128> = data.buffer::<u128>(0)[..data.len()].to_vec();
            let mut buffers: Vec<Vec<u8>> = data.buffers()[1..].iter().map(|b| b.to_vec()).collect();
            if round % 8 != 0 {
                let i = rng.random_range(0..views.len());
                match rng.random_range(0..4) {
                    // One bit of a view: length, prefix, buffer index or offset.
                    0 | 1 => views[i] ^= 1u128 << rng.random_range(0..128),
                    // Offset or length by one, which can split a character.
                    2 => views[i] = views[i].wrapping_add(if rng.random_bool(0.5) { 1u128 << 96 } else { 1 }),
                    _ => {
                        if let Some(b) = buffers.iter_mut().find(|b| !b.is_empty()) {
                            let at = rng.random_range(0..b.len());
                            b[at] = rng.random();
                        }
                    }
                }
            }
            let buffers: Vec<Buffer> = buffers.into_iter().map(Buffer::from_vec).collect();
            let ours = check_string_views(&views, &buffers).is_ok();
            assert_eq!(ours, arrow_says(&views, &buffers), "round {round}: {values:?} {views:x?}");
            if ours {
                accepted += 1
            } else {
                refused += 1
            }
        }
        assert!(refused > 500 && accepted > 500, "{refused} refused, {accepted} accepted");
    }

    /// A view of a long string: its length, its first four bytes, buffer and offset.
    fn long_view(data: &[u8], index: u32, offset: usize, len: usize) -> u128 {
        let prefix = u32::from_le_bytes(data[offset..offset + 4].try_into().unwrap());
        len as u128 | (prefix as u128) << 32 | (index as u128) << 64 | (offset as u128) << 96
    }

    #[test]
    fn a_long_string_cut_inside_a_character_is_refused() {
        let text = "ünïcödé strings, long enough".as_bytes();
        let buffers = [Buffer::from(text)];
        assert!(check_string_views(&[long_view(text, 0, 0, text.len())], &buffers).is_ok());
        // Byte 1 is the second byte of 'ü'; byte 3 starts 'ï'.
        assert!(check_string_views(&[long_view(text, 0, 1, 20)], &buffers).is_err());
        assert!(check_string_views(&[long_view(text, 0, 0, 14)], &buffers).is_ok());
        assert!(check_string_views(&[long_view(text, 0, 3, 14)], &buffers).is_ok());
        // Ending inside a character: 'ü' takes bytes 14 and 15 here.
        let ends = "abcdefghijklmnü".as_bytes();
        let end_buffers = [Buffer::from(ends)];
        assert!(check_string_views(&[long_view(ends, 0, 0, 15)], &end_buffers).is_err());
        assert!(check_string_views(&[long_view(ends, 0, 0, 16)], &end_buffers).is_ok());
        assert!(check_string_views(&[long_view(text, 1, 0, 13)], &buffers).is_err(), "no buffer 1");
    }

    /// Columns that are not string views still get Arrow's full validation.
    #[test]
    fn other_columns_get_arrows_full_validation() {
        use datafusion::arrow::array::{make_array, Int32Array};
        let good = RecordBatch::try_from_iter([
            ("n", std::sync::Arc::new(Int32Array::from(vec![1, 2])) as _),
            ("s", std::sync::Arc::new(StringViewArray::from_iter_values(["a", "a string longer than twelve"])) as _),
        ])
        .unwrap();
        check_batch(&good).unwrap();
        // Offsets that go backwards, as a corrupt page could carry them.
        let builder = ArrayData::builder(DataType::Utf8)
            .len(2)
            .add_buffer(Buffer::from_vec(vec![0i32, 5, 3]))
            .add_buffer(Buffer::from(b"hello".as_slice()));
        // SAFETY: the array is only checked, never read.
        let bad = make_array(unsafe { builder.build_unchecked() });
        let batch = RecordBatch::try_from_iter([("s", bad)]).unwrap();
        assert!(check_batch(&batch).is_err());
    }
}
