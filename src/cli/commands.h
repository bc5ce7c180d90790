// The matricxon sub-commands. Each parses its flags into an options struct
// and calls into the libraries; no logic of its own beyond wiring.
#pragma once

namespace mx::cli {

int MakeModelCommand(int argc, char** argv);  // matricxon make-model ...
int ChatCommand(int argc, char** argv);       // matricxon chat ...
int ServeCommand(int argc, char** argv);      // matricxon serve ...

}  // namespace mx::cli
