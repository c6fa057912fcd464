//! ggml's tensor types, as GGUF files name them: one row per type of one table — its type id,
//! its name, and how many elements a block of how many bytes holds (gguf-py 0.19's
//! `GGML_QUANT_SIZES`, which llama.cpp's `ggml_type_traits` match). The ids missing between
//! them (4, 5, 31–33, 36–38) are types ggml has removed; a file holding one is refused.
//!
//! ```
//! use dtcast_quant::GgmlType;
//! let q4k = GgmlType::from_id(12).unwrap();
//! assert_eq!((q4k.name(), q4k.block_elements(), q4k.block_bytes()), ("Q4_K", 256, 144));
//! // A row of 4096 Q4_K elements: 16 blocks.
//! assert_eq!(q4k.bytes_for(4096), Some(16 * 144));
//! assert_eq!(q4k.bytes_for(100), None); // not whole blocks
//! ```

/// One of ggml's tensor types.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct GgmlType(&'static Row);

#[derive(Debug, PartialEq, Eq, Hash)]
struct Row {
    id: u32,
    name: &'static str,
    block_elements: usize,
    block_bytes: usize,
}

const fn row(id: u32, name: &'static str, block_elements: usize, block_bytes: usize) -> Row {
    Row {
        id,
        name,
        block_elements,
        block_bytes,
    }
}

/// Every type, by id.
static TYPES: [Row; 34] = [
    row(0, "F32", 1, 4),
    row(1, "F16", 1, 2),
    row(2, "Q4_0", 32, 18),
    row(3, "Q4_1", 32, 20),
    row(6, "Q5_0", 32, 22),
    row(7, "Q5_1", 32, 24),
    row(8, "Q8_0", 32, 34),
    row(9, "Q8_1", 32, 40),
    row(10, "Q2_K", 256, 84),
    row(11, "Q3_K", 256, 110),
    row(12, "Q4_K", 256, 144),
    row(13, "Q5_K", 256, 176),
    row(14, "Q6_K", 256, 210),
    row(15, "Q8_K", 256, 292),
    row(16, "IQ2_XXS", 256, 66),
    row(17, "IQ2_XS", 256, 74),
    row(18, "IQ3_XXS", 256, 98),
    row(19, "IQ1_S", 256, 50),
    row(20, "IQ4_NL", 32, 18),
    row(21, "IQ3_S", 256, 110),
    row(22, "IQ2_S", 256, 82),
    row(23, "IQ4_XS", 256, 136),
    row(24, "I8", 1, 1),
    row(25, "I16", 1, 2),
    row(26, "I32", 1, 4),
    row(27, "I64", 1, 8),
    row(28, "F64", 1, 8),
    row(29, "IQ1_M", 256, 56),
    row(30, "BF16", 1, 2),
    row(34, "TQ1_0", 256, 54),
    row(35, "TQ2_0", 256, 66),
    row(39, "MXFP4", 32, 17),
    row(40, "NVFP4", 64, 36),
    row(41, "Q1_0", 128, 18),
];

impl GgmlType {
    /// The type with ggml's id `id`, if there is one.
    pub fn from_id(id: u32) -> Option<GgmlType> {
        TYPES.iter().find(|r| r.id == id).map(GgmlType)
    }

    /// The type GGUF and gguf-py name `name` (`"Q4_K"`, `"BF16"`; any case).
    pub fn from_name(name: &str) -> Option<GgmlType> {
        TYPES
            .iter()
            .find(|r| r.name.eq_ignore_ascii_case(name))
            .map(GgmlType)
    }

    /// Every type, in id order.
    pub fn all() -> impl Iterator<Item = GgmlType> {
        TYPES.iter().map(GgmlType)
    }

    /// ggml's id.
    pub fn id(self) -> u32 {
        self.0.id
    }

    /// The name GGUF tools print (`Q4_K`).
    pub fn name(self) -> &'static str {
        self.0.name
    }

    /// Elements a block holds (1 for the plain types).
    pub fn block_elements(self) -> usize {
        self.0.block_elements
    }

    /// Bytes a block takes.
    pub fn block_bytes(self) -> usize {
        self.0.block_bytes
    }

    /// The bytes of `elements` elements — `None` where they are not whole blocks or the count
    /// overflows.
    pub fn bytes_for(self, elements: usize) -> Option<usize> {
        let row = self.0;
        if !elements.is_multiple_of(row.block_elements) {
            return None;
        }
        (elements / row.block_elements).checked_mul(row.block_bytes)
    }
}

impl core::fmt::Display for GgmlType {
    fn fmt(&self, f: &mut core::fmt::Formatter<'_>) -> core::fmt::Result {
        f.write_str(self.0.name)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ids_and_names_are_each_one_type() {
        let types: Vec<GgmlType> = GgmlType::all().collect();
        for (i, a) in types.iter().enumerate() {
            assert_eq!(GgmlType::from_id(a.id()), Some(*a));
            assert_eq!(GgmlType::from_name(&a.name().to_lowercase()), Some(*a));
            assert!(
                types[i + 1..].iter().all(|b| b.id() > a.id()),
                "ids in order"
            );
        }
        assert_eq!(GgmlType::from_id(4), None);
        assert_eq!(GgmlType::from_name("Q4_2"), None);
    }
}
