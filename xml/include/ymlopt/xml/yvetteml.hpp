#pragma once
// YvetteML, the graph language of YML applications, as a front end of the
// workflow compiler. A YML application file
//
//   <application name="cholesky">
//     <component name="potrf" impl="blas.potrf"><param name="A" mode="inout" port="a"/></component>
//     <param name="nt" type="int" default="4"/>
//     <data name="A" shape="1024,1024" tile="256,256" init="spd"/>
//     <graph>
//       seq (k := 0; nt - 1) do
//         compute potrf(A[k][k]);
//       enddo
//       notify(factored);
//     </graph>
//   </application>
//
// is translated into the element tree of an equivalent <workflow>: abstract
// components (`<component name impl>` whose `<param name mode port|arg>` list
// gives the positional arguments of `compute`) become tasks of the registered
// `impl`, `par (i := a; b) do ... enddo` loops (bounds inclusive, several
// `(i := a; b[; step])` heads nest), `par ... // ... endpar` branches, `seq`
// loops, `if (c) then ... else ... endif` (eq neq gt ge lt le and or not),
// `x := expr;` (a <let>), `wait(e[i] and e[j]);`, `notify(e[i]);` and `#`
// comments. Every element carries the line and column of its statement in the
// graph text, so the compiler's diagnostics point into it.
#include "ymlopt/xml/diagnostic.hpp"
#include "ymlopt/xml/parser.hpp"

namespace ymlopt {

/// Rewrites an <application> element in place into a <workflow>; errors (in
/// compiler format, positions inside the graph text) go to `diags`. Returns
/// false if the application could not be translated.
bool translate_application(xml::Element& root, Diagnostics& diags);

}  // namespace ymlopt
