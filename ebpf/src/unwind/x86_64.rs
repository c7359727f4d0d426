//! The x86_64 part of table building: which DWARF registers are the stack pointer, the frame
//! pointer and the return address, and how a CFI row becomes a compact rule. The BPF side of the
//! architecture is `bpf/unwind_x86_64.bpf.h`. Another architecture adds a module like this one.

use super::table::{CfaKind, Rule};
use gimli::{CfaRule, Register, RegisterRule, UnwindTableRow, X86_64};

/// DWARF number of the stack pointer.
const SP: Register = X86_64::RSP;
/// DWARF number of the frame pointer.
const FP: Register = X86_64::RBP;
/// DWARF number of the return address column.
const RA: Register = X86_64::RA;
/// Where `call` leaves the return address: just below the CFA.
const RA_CFA_OFFSET: i64 = -8;

/// The compact rule of one CFI row (`signal`: the FDE is a signal trampoline's).
pub(crate) fn rule_of<T: gimli::ReaderOffset>(row: &UnwindTableRow<T>, signal: bool) -> Rule {
    if signal {
        return Rule::of_kind(CfaKind::Signal);
    }
    match row.register(RA) {
        Some(RegisterRule::Undefined) => return Rule::of_kind(CfaKind::End),
        Some(RegisterRule::Offset(RA_CFA_OFFSET)) => {}
        _ => return Rule::of_kind(CfaKind::Unsupported),
    }
    let (kind, offset) = match row.cfa() {
        CfaRule::RegisterAndOffset { register, offset } if *register == SP => {
            (CfaKind::Sp, *offset)
        }
        CfaRule::RegisterAndOffset { register, offset } if *register == FP => {
            (CfaKind::Fp, *offset)
        }
        _ => return Rule::of_kind(CfaKind::Unsupported),
    };
    let Ok(cfa_offset) = i16::try_from(offset) else {
        return Rule::of_kind(CfaKind::Unsupported);
    };
    let fp_offset8 = match row.register(FP) {
        None | Some(RegisterRule::SameValue) | Some(RegisterRule::Undefined) => 0,
        Some(RegisterRule::Offset(o)) if o % 8 == 0 && o != 0 => match i8::try_from(o / 8) {
            Ok(o8) => o8,
            Err(_) => return Rule::of_kind(CfaKind::Unsupported),
        },
        Some(_) => return Rule::of_kind(CfaKind::Unsupported),
    };
    Rule {
        kind,
        cfa_offset,
        fp_offset8,
    }
}
