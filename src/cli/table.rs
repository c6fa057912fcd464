//! `dtcast table`: the promotion table as markdown.

use std::io::Write;

use dtcast_dtype::DType;
use dtcast_promote::{Policy, Torch};

use super::args::TableArgs;
use super::CmdError;

pub(crate) fn run(args: &TableArgs, out: &mut dyn Write) -> Result<(), CmdError> {
    let torch = Torch::new(args.default_dtype)?;
    write!(out, "| promote_types |")?;
    for dt in DType::ALL {
        write!(out, " {dt} |")?;
    }
    write!(out, "\n|---|")?;
    for _ in DType::ALL {
        write!(out, "---|")?;
    }
    writeln!(out)?;
    for a in DType::ALL {
        write!(out, "| **{a}** |")?;
        for b in DType::ALL {
            match torch.promote_types(a, b) {
                Ok(dt) => write!(out, " {dt} |")?,
                Err(_) => write!(out, " error |")?,
            }
        }
        writeln!(out)?;
    }
    writeln!(
        out,
        "\n`error`: torch refuses the pair (float8 with another type; uint16/32/64 with a non-floating type)."
    )?;
    Ok(())
}
