/*
 * What fold serves, in torch's terms: contiguous CPU tensors of fold's datatypes, and
 * the ReduceOps fold has (AVG as a sum and a division). Everything else is refused
 * here with an error naming the operation and what would be served.
 */
#include "fold_torch.h"

namespace fold_torch {

namespace {

bool is_integer(fold_dtype_t dtype)
{
  return dtype == FOLD_INT8 || dtype == FOLD_INT16 || dtype == FOLD_INT32 ||
         dtype == FOLD_INT64 || dtype == FOLD_UINT8;
}

bool is_complex(fold_dtype_t dtype)
{
  return dtype == FOLD_COMPLEX_FLOAT32 || dtype == FOLD_COMPLEX_FLOAT64;
}

}  // namespace

std::string fold_failure(const char *op_name, int status)
{
  return std::string("fold: ") + op_name + " failed: " + fold_status_string(status);
}

const at::Tensor &served_tensor(const std::vector<at::Tensor> &tensors, const char *op_name)
{
  TORCH_CHECK(tensors.size() == 1, "fold: ", op_name, " takes one tensor per rank, got ",
              tensors.size());
  const at::Tensor &t = tensors[0];
  TORCH_CHECK(t.device().is_cpu(), "fold: ", op_name, " serves CPU tensors only, got one on ",
              t.device().str());
  TORCH_CHECK(t.layout() == at::kStrided, "fold: ", op_name,
              " serves dense (strided) tensors only, got layout ", t.layout());
  TORCH_CHECK(t.is_contiguous(), "fold: ", op_name,
              " serves contiguous tensors only; pass tensor.contiguous() and copy the result"
              " back");
  return t;
}

fold_dtype_t fold_dtype_of(const at::Tensor &t, const char *op_name)
{
  switch (t.scalar_type()) {
  case at::kChar: return FOLD_INT8;
  case at::kShort: return FOLD_INT16;
  case at::kInt: return FOLD_INT32;
  case at::kLong: return FOLD_INT64;
  case at::kByte: return FOLD_UINT8;
  case at::kHalf: return FOLD_FLOAT16;
  case at::kBFloat16: return FOLD_BFLOAT16;
  case at::kFloat: return FOLD_FLOAT32;
  case at::kDouble: return FOLD_FLOAT64;
  case at::kComplexFloat: return FOLD_COMPLEX_FLOAT32;
  case at::kComplexDouble: return FOLD_COMPLEX_FLOAT64;
  default:
    TORCH_CHECK(false, "fold: ", op_name, " does not serve dtype ", t.scalar_type(),
                " (fold serves int8, int16, int32, int64, uint8, float16, bfloat16,"
                " float32, float64, complex64, complex128)");
  }
}

fold_op_t fold_op_of(const c10d::ReduceOp &op, fold_dtype_t dtype, const char *op_name,
                     bool *avg)
{
  const char *dtype_name = fold_dtype_name(dtype);
  *avg = false;
  switch (op.op_) {
  case c10d::ReduceOp::SUM: return FOLD_OP_SUM;
  case c10d::ReduceOp::PRODUCT: return FOLD_OP_PROD;
  case c10d::ReduceOp::AVG:
    TORCH_CHECK(!is_integer(dtype), "fold: ", op_name, " with AVG needs a floating or complex"
                " tensor, got ", dtype_name, " (use SUM and divide as you need)");
    *avg = true;
    return FOLD_OP_SUM;
  case c10d::ReduceOp::MIN:
  case c10d::ReduceOp::MAX:
    TORCH_CHECK(!is_complex(dtype), "fold: ", op_name, " with MIN or MAX does not take ",
                dtype_name, " (complex numbers are not ordered)");
    return op.op_ == c10d::ReduceOp::MIN ? FOLD_OP_MIN : FOLD_OP_MAX;
  case c10d::ReduceOp::BAND:
  case c10d::ReduceOp::BOR:
  case c10d::ReduceOp::BXOR:
    TORCH_CHECK(is_integer(dtype), "fold: ", op_name, " with a bitwise op (BAND, BOR, BXOR)"
                " needs an integer tensor, got ", dtype_name);
    return op.op_ == c10d::ReduceOp::BAND ? FOLD_OP_BAND
         : op.op_ == c10d::ReduceOp::BOR  ? FOLD_OP_BOR : FOLD_OP_BXOR;
  default:
    TORCH_CHECK(false, "fold: ", op_name, " does not serve ReduceOp ", (int)op.op_,
                " (PREMUL_SUM); fold serves SUM, AVG, PRODUCT, MIN, MAX, BAND, BOR, BXOR");
  }
}

}  // namespace fold_torch
