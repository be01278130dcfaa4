#pragma once

#include <concepts>
#include <memory>
#include <stdexcept>
#include <string>
#include <type_traits>
#include <typeinfo>
#include <utility>

#include "pipesched/exec/executor.hpp"
#include "pipesched/ir/op.hpp"

namespace pipesched {

/// A message of any movable type (move-only, like std::unique_ptr): what any_executor passes
/// between stages. Default-constructed = empty, the "no input" of the executor concept.
class any_message {
 public:
  any_message() = default;
  template <class T>
    requires(!std::same_as<std::remove_cvref_t<T>, any_message>)
  explicit any_message(T&& value)
      : holder_(std::make_unique<holder<std::remove_cvref_t<T>>>(std::forward<T>(value))) {}

  bool has_value() const noexcept { return holder_ != nullptr; }
  /// The held type (typeid(void) when empty).
  const std::type_info& type() const noexcept { return holder_ ? holder_->type() : typeid(void); }
  /// Pointer to the held T, or nullptr when empty or holding another type.
  template <class T>
  T* get_if() noexcept {
    auto* h = dynamic_cast<holder<T>*>(holder_.get());
    return h ? &h->value : nullptr;
  }
  /// Moves the held T out (T{} when empty); throws std::logic_error when it holds another type.
  template <class T>
  T take() {
    if (!holder_) {
      return T{};
    }
    T* p = get_if<T>();
    if (p == nullptr) {
      throw std::logic_error(std::string("any_message: holds ") + holder_->type().name() +
                             ", expected " + typeid(T).name());
    }
    T out = std::move(*p);
    holder_.reset();
    return out;
  }

 private:
  struct holder_base {
    virtual ~holder_base() = default;
    virtual const std::type_info& type() const noexcept = 0;
  };
  template <class T>
  struct holder final : holder_base {
    template <class U>
    explicit holder(U&& v) : value(std::forward<U>(v)) {}
    const std::type_info& type() const noexcept override { return typeid(T); }
    T value;
  };
  std::unique_ptr<holder_base> holder_;
};

/// A type-erased executor, for plugin-style use (an executor chosen at run time, or compiled
/// elsewhere): wraps any `executor` E, passing its messages inside any_message. One virtual
/// call and one allocation per op; the templates stay the zero-overhead path.
///   any_executor a(sleep_executor(costs));     // owns a moved executor
///   auto b = any_executor::ref(my_model);      // refers to one that must outlive it
///   run_threaded(a, sched);
class any_executor {
 public:
  using message = any_message;

  /// Owns `e` (moved in). A type that is not an executor is refused with a plain-English
  /// static_assert (detail::check_executor) rather than a failed constraint.
  template <class E>
    requires(!std::same_as<std::remove_cvref_t<E>, any_executor>)
  explicit any_executor(E e) : impl_(make_owning(std::move(e))) {}

  /// Refers to `e` without owning it.
  template <class E>
  static any_executor ref(E& e) {
    static_assert(detail::check_executor<E>());
    if constexpr (executor<E>) {
      // As a unique_ptr<base>: the private constructor, not the owning template.
      return any_executor(std::unique_ptr<base>(std::make_unique<model<referring<E>>>(&e)));
    } else {
      return any_executor(std::unique_ptr<base>{});
    }
  }

  /// What drivers call: forwards the context to the wrapped executor (its short form when it
  /// has no context form, see detail::run_op).
  message run(const op_context& c, message&& in) { return impl_->run(c, std::move(in)); }
  /// For direct calls. Throws std::logic_error when the wrapped executor has only the context
  /// form: its context can't be made up from a stage and an op.
  message run(stage_index s, const op& o, message&& in) {
    return impl_->run_short(s, o, std::move(in));
  }

 private:
  struct base {
    virtual ~base() = default;
    virtual any_message run(const op_context& c, any_message&& in) = 0;
    virtual any_message run_short(stage_index s, const op& o, any_message&& in) = 0;
  };
  template <class E>
  static any_message call(E& e, const op_context& c, any_message&& in) {
    using M = typename E::message;
    return any_message(detail::run_op(e, c, in.take<M>()));
  }
  template <class E>
  static any_message call_short(E& e, stage_index s, const op& o, any_message&& in) {
    using M = typename E::message;
    if constexpr (detail::stage_run<E>) {
      return any_message(e.run(s, o, in.take<M>()));
    } else {
      throw std::logic_error(
          "any_executor: the wrapped executor has no run(stage_index, const op&, message&&) "
          "returning message; call run(const op_context&, message&&)");
    }
  }
  // One implementation for both ownerships: `get` yields the wrapped executor.
  template <class Holder>
  struct model final : base {
    template <class... A>
    explicit model(A&&... a) : held(std::forward<A>(a)...) {}
    any_message run(const op_context& c, any_message&& in) override {
      return call(Holder::get(held), c, std::move(in));
    }
    any_message run_short(stage_index s, const op& o, any_message&& in) override {
      return call_short(Holder::get(held), s, o, std::move(in));
    }
    typename Holder::type held;
  };
  template <class E>
  struct owning {
    using type = E;
    static E& get(E& e) { return e; }
  };
  template <class E>
  struct referring {
    using type = E*;
    static E& get(E* e) { return *e; }
  };
  explicit any_executor(std::unique_ptr<base> impl) : impl_(std::move(impl)) {}
  template <class E>
  static std::unique_ptr<base> make_owning(E&& e) {
    using D = std::remove_cvref_t<E>;
    static_assert(detail::check_executor<D>());
    if constexpr (executor<D>) {
      return std::make_unique<model<owning<D>>>(std::forward<E>(e));
    } else {
      return nullptr;
    }
  }

  std::unique_ptr<base> impl_;
};

}  // namespace pipesched
