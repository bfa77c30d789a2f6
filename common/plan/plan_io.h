// Plan files. Two forms of the same Plan:
//  * JSON (plan.json), for people: metadata, totals, and per unit its id, layer,
//    matrix name, chunk index, rows, cols, action name, salient count and bits.
//    Reading uses only the metadata and the per-unit "action" names; everything
//    else is recomputed from the unit table (and must agree on id/layer/matrix/chunk).
//  * binary (plan.bin), exact:
//        bytes 0..7    magic "WQPLAN1\0"
//        bytes 8..11   format version, uint32 little-endian (1)
//        bytes 12..19  payload length P, uint64 little-endian
//        P bytes       serialized windquant.v1.Plan
//        32 bytes      SHA-256 of every byte before it
// Reading validates everything against a UnitTable (Plan::Validate): a corrupted or
// truncated file, a plan for another model (fingerprint), a wrong unit count, an
// unknown action: one-line INVALID_ARGUMENT / DATA_LOSS naming the file (and unit).
// Stateless functions; thread-safe.
#ifndef WINDQUANT_COMMON_PLAN_PLAN_IO_H_
#define WINDQUANT_COMMON_PLAN_PLAN_IO_H_

#include <cstdint>
#include <string>
#include <string_view>

#include "absl/status/statusor.h"
#include "common/plan/plan.h"
#include "common/plan/unit_table.h"

namespace windquant::plan {

inline constexpr char kPlanMagic[8] = {'W', 'Q', 'P', 'L', 'A', 'N', '1', '\0'};
inline constexpr uint32_t kPlanBinaryVersion = 1;

// JSON text of a plan (requires plan.Validate(table) to pass).
std::string PlanToJson(const Plan& plan, const UnitTable& table);
// `source` names the text in errors (usually its path).
absl::StatusOr<Plan> PlanFromJson(std::string_view text, const UnitTable& table,
                                  const std::string& source);

std::string PlanToBinary(const Plan& plan, const UnitTable& table);
absl::StatusOr<Plan> PlanFromBinary(std::string_view bytes, const UnitTable& table,
                                    const std::string& source);

// Validates, then writes <dir>/plan.json and <dir>/plan.bin atomically.
absl::Status WritePlanFiles(const Plan& plan, const UnitTable& table, const std::string& dir);
// Reads a plan.bin or a plan.json (told apart by the magic) and validates it.
absl::StatusOr<Plan> ReadPlanFile(const std::string& path, const UnitTable& table);

}  // namespace windquant::plan

#endif  // WINDQUANT_COMMON_PLAN_PLAN_IO_H_
